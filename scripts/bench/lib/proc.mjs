// Child processes of a bench run: the service processes (API, delivery, the
// bare reference servers) and the load generators. Each child gets an IPC
// channel; servers also get the probe (lib/probe.mjs) preloaded.
import { spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { benchDir, root } from './paths.mjs';

const probePath = join(benchDir, 'lib', 'probe.mjs');
const children = new Set();

/** A free TCP port on 127.0.0.1. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** How the service's TypeScript is run: straight from source with tsx, or the compiled dist/. */
export function entryArgs(runner, process_) {
  if (runner === 'dist') return [join(root, 'dist', process_, 'src', 'main.js')];
  return ['--import', 'tsx', join(root, process_, 'src', 'main.ts')];
}

class Child {
  constructor(name, child) {
    this.name = name;
    this.child = child;
    this.pid = child.pid;
    this.exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    this.exitCode = null;
    this.exited.then((r) => (this.exitCode = r));
    this.nextId = 1;
    this.pending = new Map();
    this.listeners = new Set();
    child.on('message', (msg) => {
      if (msg && msg.probeReply !== undefined) {
        const p = this.pending.get(msg.probeReply);
        this.pending.delete(msg.probeReply);
        if (msg.error) p?.reject(new Error(`${name}: ${msg.error}`));
        else p?.resolve(msg.result);
        return;
      }
      for (const fn of this.listeners) fn(msg);
    });
    this.exited.then(({ code, signal }) => {
      for (const p of this.pending.values()) p.reject(new Error(`${name} exited (${signal ?? code})`));
      this.pending.clear();
    });
  }

  /** Sends a request to the child's probe or worker and waits for its reply. */
  request(probe, args = {}, timeoutMs = 120_000) {
    if (this.exitCode) return Promise.reject(new Error(`${this.name} has exited (${this.exitCode.signal ?? this.exitCode.code})`));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new Error(`${this.name}: no answer to ${probe} within ${timeoutMs} ms`));
      }, timeoutMs);
      this.pending.set(id, {
        resolve: (v) => (clearTimeout(timer), resolve(v)),
        reject: (e) => (clearTimeout(timer), reject(e)),
      });
      this.child.send({ ...args, probe, id });
    });
  }

  onMessage(fn) {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  async stop(timeoutMs = 15_000) {
    if (this.exitCode) return this.exitCode;
    this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.child.kill('SIGKILL'), timeoutMs);
    const r = await this.exited;
    clearTimeout(timer);
    children.delete(this);
    return r;
  }
}

/**
 * Starts a Node child. `logFile` receives its stdout and stderr (written by the
 * kernel, so a chatty logger costs the parent nothing).
 */
export function startNode(name, args, { env = {}, logFile, probe = false, execArgv = [] } = {}) {
  const fd = logFile ? openSync(logFile, 'a') : 'ignore';
  const child = spawn(process.execPath, [...execArgv, ...(probe ? ['--import', probePath] : []), ...args], {
    cwd: root,
    env: { ...process.env, ...env },
    stdio: ['ignore', fd, fd, 'ipc'],
  });
  if (typeof fd === 'number') closeSync(fd);
  const c = new Child(name, child);
  children.add(c);
  c.exited.then(() => children.delete(c));
  return c;
}

/** Waits until GET url answers 200 (or the child dies). */
export async function waitHttp(url, child, timeoutMs = 90_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (child.exitCode) throw new Error(`${child.name} exited during start (${child.exitCode.signal ?? child.exitCode.code}); see its log`);
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
      await res.arrayBuffer();
      if (res.ok) return;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) throw new Error(`${child.name} did not answer ${url} within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Stops every child still running (on the way out, also after a failure). */
export async function stopAll() {
  await Promise.all([...children].map((c) => c.stop(5000).catch(() => undefined)));
}
