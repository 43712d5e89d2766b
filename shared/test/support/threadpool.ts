/**
 * Holds every thread of libuv's pool (the one dns.lookup, scrypt, fs and zlib
 * share) until release(): each thread blocks opening a FIFO for reading, which
 * waits for a writer. What still completes meanwhile never needed the pool.
 */
import { execFileSync } from 'node:child_process';
import { randomFill } from 'node:crypto';
import { closeSync, constants, mkdtempSync, openSync, rmSync } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface HeldPool {
  /** False while the pool is held: a small job queued behind the held threads has not run. */
  readonly free: () => boolean;
  release(): Promise<void>;
}

export async function holdThreadpool(): Promise<HeldPool> {
  const threads = Number(process.env.UV_THREADPOOL_SIZE ?? 4);
  const dir = mkdtempSync(join(tmpdir(), 'pool-'));
  const fifos = Array.from({ length: threads }, (_, i) => join(dir, `f${i}`));
  for (const f of fifos) execFileSync('mkfifo', [f]);
  const readers: Promise<FileHandle>[] = fifos.map((f) => open(f, 'r'));
  let free = false;
  randomFill(Buffer.alloc(8), () => (free = true));
  await new Promise((r) => setTimeout(r, 100));
  let released = false;
  return {
    free: () => free,
    async release() {
      if (released) return;
      released = true;
      // Writers opened from this thread (O_NONBLOCK: the readers are already waiting) free the threads.
      for (const f of fifos) closeSync(openSync(f, constants.O_WRONLY | constants.O_NONBLOCK));
      for (const r of await Promise.all(readers)) await r.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** The work's result, or 'waiting' if it has not finished within ms (the pool is released either way by the caller). */
export function within<T>(work: Promise<T>, ms: number): Promise<T | 'waiting'> {
  let timer: NodeJS.Timeout | undefined;
  const waited = new Promise<'waiting'>((r) => (timer = setTimeout(() => r('waiting'), ms)));
  return Promise.race([work, waited]).finally(() => clearTimeout(timer));
}
