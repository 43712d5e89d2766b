// The dashboard's real-browser tests need Chromium. Like Kafka and FerretDB, the test
// setup installs it when it is missing (Debian's package, as root), or stops the run
// with the command that fixes it: a browser test that silently skips is not a pass.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';

export const DEFAULT_CHROMIUM = '/usr/bin/chromium';

/** The path of a Chromium binary, installing Debian's package when allowed; throws with the fix otherwise. */
export function ensureChromium(env = process.env) {
  const path = env.CHROMIUM_PATH || DEFAULT_CHROMIUM;
  if (existsSync(path)) return path;
  const fix = `apt-get install -y chromium (as root), or set CHROMIUM_PATH to a Chromium binary`;
  if (env.CHROMIUM_PATH) throw new Error(`CHROMIUM_PATH=${path} does not exist; ${fix}`);
  const canInstall = typeof process.getuid === 'function' && process.getuid() === 0 && existsSync('/usr/bin/apt-get') && env.CHROMIUM_AUTO_INSTALL !== '0';
  if (!canInstall) throw new Error(`the dashboard's browser tests need Chromium and it is not installed: ${fix}`);
  console.error('[setup] installing Chromium (Debian package chromium) for the dashboard browser tests ...');
  const started = Date.now();
  const run = (args) => execFileSync('apt-get', args, { stdio: ['ignore', 'ignore', 'inherit'], env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
  try {
    run(['install', '-y', '-qq', 'chromium']);
  } catch {
    run(['update', '-qq']);
    run(['install', '-y', '-qq', 'chromium']);
  }
  if (!existsSync(path)) throw new Error(`apt-get installed chromium but ${path} is missing; ${fix}`);
  console.error(`[setup] Chromium installed (${Math.round((Date.now() - started) / 1000)} s)`);
  return path;
}
