// Tools some tests drive besides Kafka and FerretDB: Chromium (the dashboard's browser tests),
// nginx (the compose gateway, run for real), Docker Compose v2 (checks docker-compose.yml), and
// curl and jq (the README's quick start, run as a user pastes it) and script(1) (`npm start` on a terminal).
// Like the services, the test setup installs what is missing (Debian packages as root, Compose
// built from its Go module into the cache) or stops the run with the command that fixes it:
// a test that silently skips is not a pass.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));

function which(bin) {
  for (const dir of (process.env.PATH ?? '').split(':')) if (dir && existsSync(join(dir, bin))) return join(dir, bin);
  for (const dir of ['/usr/sbin', '/usr/bin', '/sbin']) if (existsSync(join(dir, bin))) return join(dir, bin);
  return null;
}

function aptInstall(pkg) {
  const canInstall = typeof process.getuid === 'function' && process.getuid() === 0 && existsSync('/usr/bin/apt-get') && process.env.TEST_TOOLS_AUTO_INSTALL !== '0';
  if (!canInstall) return false;
  console.error(`[setup] installing Debian's ${pkg} for the tests ...`);
  const started = Date.now();
  const run = (args) => execFileSync('apt-get', args, { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
  try {
    run(['install', '-y', '-qq', pkg]);
  } catch {
    run(['update', '-qq']);
    run(['install', '-y', '-qq', pkg]);
  }
  console.error(`[setup] ${pkg} installed (${Math.round((Date.now() - started) / 1000)} s)`);
  return true;
}

/** A binary from a Debian package: `envVar` if set, else on PATH, else installed; throws with the fix. */
function debianTool({ envVar, bin, pkg }) {
  const given = process.env[envVar];
  if (given) {
    if (existsSync(given)) return given;
    throw new Error(`${envVar}=${given} does not exist`);
  }
  const found = which(bin);
  if (found) return found;
  if (aptInstall(pkg) && which(bin)) return which(bin);
  throw new Error(`the tests need ${bin} and it is not installed: apt-get install -y ${pkg} (as root), or set ${envVar}`);
}

export const TOOLS = {
  chromium: { files: ['dashboard-browser'], find: () => ({ CHROMIUM_PATH: debianTool({ envVar: 'CHROMIUM_PATH', bin: 'chromium', pkg: 'chromium' }) }) },
  nginx: {
    files: ['deploy.test'],
    find: () => ({ NGINX_BIN: debianTool({ envVar: 'NGINX_BIN', bin: 'nginx', pkg: 'nginx-light' }), OPENSSL_BIN: debianTool({ envVar: 'OPENSSL_BIN', bin: 'openssl', pkg: 'openssl' }) }),
  },
  pty: {
    // script(1) gives `npm start` a pseudo-terminal, as a developer's shell does.
    files: ['start.test'],
    find: () => ({ SCRIPT_BIN: debianTool({ envVar: 'SCRIPT_BIN', bin: 'script', pkg: 'bsdutils' }) }),
  },
  shell: {
    files: ['readme-quickstart'],
    find: () => ({ CURL_BIN: debianTool({ envVar: 'CURL_BIN', bin: 'curl', pkg: 'curl' }), JQ_BIN: debianTool({ envVar: 'JQ_BIN', bin: 'jq', pkg: 'jq' }) }),
  },
  compose: {
    files: ['deploy.test'],
    find: () => {
      if (process.env.COMPOSE_BIN) return { COMPOSE_BIN: process.env.COMPOSE_BIN };
      const out = execFileSync('bash', [join(here, 'compose.sh')], { stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' }).trim();
      return { COMPOSE_BIN: out.split('\n').at(-1) };
    },
  },
};

/** The environment naming each tool the selected test files need (all of them for a full run). */
export function ensureTestTools(needs) {
  const env = {};
  for (const [name, tool] of Object.entries(TOOLS)) if (needs(tool.files)) Object.assign(env, tool.find(name));
  return env;
}
