// Tools some tests drive besides Kafka and FerretDB: Chromium (the dashboard's browser tests),
// nginx (the compose gateway, run for real), Docker Compose v2 (checks docker-compose.yml), and
// curl and jq (the README's quick start, run as a user pastes it) and script(1) (`npm start` on a terminal).
// Like the services, the test setup installs what is missing (Debian packages as root, in one
// apt-get run; Compose built from its Go module into the cache) or stops the run with the command
// that fixes it: a test that silently skips is not a pass.
//
// Nothing here blocks the event loop, so npm test installs these while the services start. A
// Compose build (minutes on a machine that has none yet) is not waited for at all: it runs in the
// background at a low priority, and the deploy test waits for it (COMPOSE_BUILDING=1), which npm
// test runs among the last files.
import { execFile, spawn } from 'node:child_process';
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const here = dirname(fileURLToPath(import.meta.url));
const run = promisify(execFile);

function which(bin) {
  for (const dir of (process.env.PATH ?? '').split(':')) if (dir && existsSync(join(dir, bin))) return join(dir, bin);
  for (const dir of ['/usr/sbin', '/usr/bin', '/sbin']) if (existsSync(join(dir, bin))) return join(dir, bin);
  return null;
}

/** Installs Debian packages in one apt-get run (dpkg takes one at a time anyway); false when this machine cannot. */
async function aptInstall(pkgs) {
  const canInstall = typeof process.getuid === 'function' && process.getuid() === 0 && existsSync('/usr/bin/apt-get') && process.env.TEST_TOOLS_AUTO_INSTALL !== '0';
  if (!canInstall) return false;
  console.error(`[setup] installing Debian's ${pkgs.join(', ')} for the tests ...`);
  const started = Date.now();
  const apt = (args) => run('apt-get', args, { env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' }, maxBuffer: 64 << 20 });
  try {
    await apt(['install', '-y', '-qq', ...pkgs]);
  } catch {
    await apt(['update', '-qq']);
    await apt(['install', '-y', '-qq', ...pkgs]);
  }
  console.error(`[setup] ${pkgs.join(', ')} installed (${Math.round((Date.now() - started) / 1000)} s)`);
  return true;
}

/** Binaries from Debian packages: `envVar` if set, else on PATH, else installed (with the others missing); throws with the fix. */
async function debianTools(specs) {
  const found = {};
  const missing = [];
  for (const { envVar, bin, pkg } of specs) {
    const given = process.env[envVar];
    if (given) {
      if (!existsSync(given)) throw new Error(`${envVar}=${given} does not exist`);
      found[envVar] = given;
    } else if (which(bin)) found[envVar] = which(bin);
    else missing.push({ envVar, bin, pkg });
  }
  if (missing.length === 0) return found;
  const pkgs = [...new Set(missing.map((m) => m.pkg))];
  const installed = await aptInstall(pkgs).catch((err) => {
    throw new Error(`apt-get install ${pkgs.join(' ')} failed: ${String(err.stderr || err.message).slice(-1000)}`);
  });
  for (const { envVar, bin, pkg } of missing) {
    if (installed && which(bin)) found[envVar] = which(bin);
    else throw new Error(`the tests need ${bin} and it is not installed: apt-get install -y ${pkg} (as root), or set ${envVar}`);
  }
  return found;
}

/** COMPOSE_BIN when it is built or given; otherwise its build starts in the background and the deploy test waits for it. */
async function compose() {
  if (process.env.COMPOSE_BIN) return { COMPOSE_BIN: process.env.COMPOSE_BIN };
  const script = join(here, 'compose.sh');
  const { stdout } = await run('bash', [script, '--path'], { encoding: 'utf8' });
  const bin = stdout.trim().split('\n').at(-1);
  if (existsSync(bin)) return { COMPOSE_BIN: bin };
  rmSync(`${bin}.failed`, { force: true });
  // The build competes with the tests for the cores: at the lowest priority it takes what they leave.
  const child = spawn('nice', ['-n', '19', 'bash', script], { stdio: ['ignore', 'ignore', 'pipe'] });
  const output = [];
  child.stderr.on('data', (chunk) => output.push(chunk));
  child.on('exit', (code) => {
    if (code !== 0) writeFileSync(`${bin}.failed`, `scripts/infra/compose.sh exited with ${code}:\n${Buffer.concat(output).toString()}`);
  });
  child.unref();
  return { COMPOSE_BIN: bin, COMPOSE_BUILDING: '1' };
}

const DEBIAN = {
  chromium: { files: ['dashboard-browser'], specs: [{ envVar: 'CHROMIUM_PATH', bin: 'chromium', pkg: 'chromium' }] },
  nginx: {
    files: ['deploy.test'],
    specs: [
      { envVar: 'NGINX_BIN', bin: 'nginx', pkg: 'nginx-light' },
      { envVar: 'OPENSSL_BIN', bin: 'openssl', pkg: 'openssl' },
    ],
  },
  // script(1) gives `npm start` a pseudo-terminal, as a developer's shell does.
  pty: { files: ['start.test'], specs: [{ envVar: 'SCRIPT_BIN', bin: 'script', pkg: 'bsdutils' }] },
  shell: {
    files: ['readme-quickstart'],
    specs: [
      { envVar: 'CURL_BIN', bin: 'curl', pkg: 'curl' },
      { envVar: 'JQ_BIN', bin: 'jq', pkg: 'jq' },
    ],
  },
};

/** The environment naming each tool the selected test files need (all of them for a full run). */
export async function ensureTestTools(needs) {
  const specs = Object.values(DEBIAN).flatMap((tool) => (needs(tool.files) ? tool.specs : []));
  const [debian, built] = await Promise.all([debianTools(specs), needs(['deploy.test']) ? compose() : {}]);
  return { ...debian, ...built };
}
