/**
 * `npm start` (scripts/start.mjs) tells a developer where they are: once the API is ready it
 * prints the mode, the API and dashboard URLs, the development ingest token and how to stop;
 * Ctrl-C stops both processes.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { atFileEnd } from '#test-support/cleanup.js';
import { baseTestEnv, ownDatabase } from '#test-support/env.js';
import { eventually, freePort } from '#test-support/wait.js';
import { DEV_INGEST_TOKEN } from '../src/config.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** scripts/start.mjs on the run's services, on a topic and database of its own, as a developer runs it. */
async function start(opts: { terminal?: boolean } = {}): Promise<{ child: ChildProcess; out: () => string; port: number }> {
  const port = await freePort();
  const base = baseTestEnv({ MONGO_DB: ownDatabase('start') });
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    KAFKA_BROKERS: base.KAFKA_BROKERS,
    MONGO_URL: base.MONGO_URL,
    EVENTS_TOPIC: `${base.EVENTS_TOPIC}-start`,
    EVENTS_PARTITIONS: '3',
    MONGO_DB: base.MONGO_DB,
    PORT: String(port),
    METRICS_PORT: '0',
  };
  const command = [process.execPath, join(root, 'scripts', 'start.mjs')];
  // On a terminal: util-linux's script(1) gives it a pseudo-terminal, as a developer's shell does.
  const [file, args] = opts.terminal ? [process.env.SCRIPT_BIN ?? 'script', ['-qfec', `exec ${command.map((a) => `'${a}'`).join(' ')}`, '/dev/null']] : [command[0]!, command.slice(1)];
  const child = spawn(file!, args as string[], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
  atFileEnd(() => interrupt(child, opts.terminal ?? false));
  let text = '';
  child.stdout!.on('data', (d: Buffer) => (text += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (text += d.toString()));
  return { child, out: () => text, port };
}

/**
 * Ctrl-C: SIGINT to start.mjs. Under script(1) it runs in a session of its own on the
 * pseudo-terminal, as script's child (`exec`), so it is found through /proc.
 */
function interrupt(child: ChildProcess, terminal: boolean): void {
  try {
    if (!terminal) {
      child.kill('SIGINT');
      return;
    }
    const kids = readFileSync(`/proc/${child.pid}/task/${child.pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean);
    for (const pid of kids) process.kill(Number(pid), 'SIGINT');
  } catch {
    // already ended
  }
}

describe('npm start', function () {
  this.timeout(180_000);

  it('prints a banner once the API is ready: mode, URLs, the development ingest token, how to stop; Ctrl-C stops it', async () => {
    const { child, out, port } = await start();
    const text = await eventually(async () => (/Stop {10}Ctrl-C/.test(out()) ? out() : undefined), 150_000, 200);
    expect(text).to.include('development mode');
    expect(text).to.include(`API           http://127.0.0.1:${port}`);
    expect(text).to.include(`Dashboard     http://127.0.0.1:${port}/dashboard`);
    expect(text).to.include(`Ingest token  ${DEV_INGEST_TOKEN} (the development default, DEV_INGEST_TOKEN in api/src/config.ts`);
    expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status, 'the API the banner names answers').to.equal(200);
    expect(text, 'not a terminal: JSON logs').to.match(/^\{"level":30,.*"msg":"api listening"\}$/m);
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    child.kill('SIGINT');
    expect(await exited).to.equal(0);
  });

  it('shows the logs through pino-pretty when stdout is a terminal in development', async () => {
    const { child, out } = await start({ terminal: true });
    try {
      const text = await eventually(async () => (/Stop {10}Ctrl-C/.test(out()) ? out() : undefined), 150_000, 200);
      expect(text).to.match(/INFO.*\(api\):.*api listening/);
      expect(text).not.to.include('{"level":');
    } finally {
      const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
      interrupt(child, true);
      expect(await exited, 'script(1) ends with start.mjs, after Ctrl-C').to.equal(0);
    }
  });
});
