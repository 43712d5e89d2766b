/**
 * The API and delivery processes as real child processes (`node --import tsx
 * <process>/src/main.ts`), the way they run in production: started with an
 * environment, waited for, signalled (SIGKILL / SIGTERM) and restarted. Each
 * process's output goes to test-artifacts/faults/logs/<name>.log.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { atFileEnd } from '#test-support/cleanup.js';
import { ROOT } from './infra.js';

export const ARTIFACTS = join(ROOT, 'test-artifacts');
const LOGS = join(ARTIFACTS, 'faults', 'logs');

export type Kind = 'api' | 'delivery';

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export { freePort } from '#test-support/wait.js';

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export class ServiceProcess {
  private child: ChildProcess | null = null;
  private exited: Promise<Exit> | null = null;
  /** Every exit so far that the test did not ask for (a crash), with its output tail. */
  readonly unexpectedExits: Exit[] = [];
  private expectingExit = false;
  starts = 0;

  constructor(
    readonly name: string,
    readonly kind: Kind,
    readonly env: Record<string, string>,
    /** For the API: where it listens. */
    readonly url: string | null = null,
  ) {
    atFileEnd(async () => {
      await this.stop('SIGKILL');
    });
  }

  get pid(): number | null {
    return this.child?.pid ?? null;
  }

  get running(): boolean {
    return this.child !== null && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Starts the process and waits until it is ready (API: /readyz answers 200; delivery: its worker logged it started). */
  async start(readyTimeoutMs = 90_000): Promise<void> {
    if (this.running) throw new Error(`${this.name} is already running`);
    mkdirSync(LOGS, { recursive: true });
    const logFile = join(LOGS, `${this.name}.log`);
    const out = createWriteStream(logFile, { flags: 'a' });
    out.write(`\n===== start #${this.starts + 1} at ${new Date().toISOString()} =====\n`);
    const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, this.kind, 'src', 'main.ts')], {
      cwd: ROOT,
      env: { ...process.env, ...this.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child = child;
    this.starts += 1;
    this.expectingExit = false;
    child.stdout?.pipe(out, { end: false });
    child.stderr?.pipe(out, { end: false });
    let startedLine = false;
    let recent = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      if (startedLine) return;
      recent = recent.slice(-100) + chunk.toString('utf8'); // a line may arrive in two chunks
      startedLine = recent.includes('"delivery worker started"');
    });
    this.exited = new Promise<Exit>((resolve) => {
      child.once('exit', (code, signal) => {
        const exit = { code, signal };
        if (!this.expectingExit) this.unexpectedExits.push(exit);
        out.end(`===== exit ${signal ?? code} at ${new Date().toISOString()} =====\n`);
        resolve(exit);
      });
    });
    const deadline = Date.now() + readyTimeoutMs;
    for (;;) {
      if (!this.running) throw new Error(`${this.name} exited while starting; see ${logFile}:\n${this.tail(logFile)}`);
      if (this.kind === 'delivery' ? startedLine : await this.ready()) return;
      if (Date.now() > deadline) throw new Error(`${this.name} not ready within ${readyTimeoutMs} ms; see ${logFile}`);
      await sleep(100);
    }
  }

  /** True when GET /readyz answers 200. */
  async ready(): Promise<boolean> {
    if (!this.url) return this.running;
    try {
      const res = await fetch(`${this.url}/readyz`, { signal: AbortSignal.timeout(5000) });
      await res.arrayBuffer();
      return res.status === 200;
    } catch {
      return false;
    }
  }

  /** Sends the signal and waits for the exit (SIGKILL: the process gets no say). */
  async stop(signal: NodeJS.Signals = 'SIGTERM', timeoutMs = 20_000): Promise<Exit | null> {
    if (!this.child || !this.exited) return null;
    if (!this.running) return this.exited;
    this.expectingExit = true;
    this.child.kill(signal);
    let timer: NodeJS.Timeout | undefined;
    const exit = await Promise.race([this.exited, new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), timeoutMs)))]);
    clearTimeout(timer);
    if (exit) return exit;
    this.child.kill('SIGKILL');
    return this.exited;
  }

  kill(): Promise<Exit | null> {
    return this.stop('SIGKILL');
  }

  async restart(): Promise<void> {
    await this.stop('SIGKILL');
    await this.start();
  }

  /** Resident set size in bytes, from /proc (Linux). */
  rss(): number | null {
    if (!this.running || !this.pid) return null;
    try {
      const status = readFileSync(`/proc/${this.pid}/status`, 'utf8');
      const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
      return m ? Number(m[1]) * 1024 : null;
    } catch {
      return null;
    }
  }

  private tail(file: string): string {
    try {
      return readFileSync(file, 'utf8').split('\n').slice(-30).join('\n');
    } catch {
      return '';
    }
  }
}
