// CPU used by the local FerretDB and Kafka processes (from their pid files in
// the infra run dir) over a window: where the time goes when a figure is held
// back by the store or the broker rather than by our processes.
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

const runDir = process.env.EVENT_PLATFORM_RUN ?? join(process.env.EVENT_PLATFORM_CACHE ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'event-platform'), 'run');
const TICKS = 100; // USER_HZ on Linux

function ticks(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return Number(fields[11]) + Number(fields[12]); // utime + stime
  } catch {
    return null;
  }
}

function pidOf(name) {
  const file = join(runDir, `${name}.pid`);
  return existsSync(file) ? readFileSync(file, 'utf8').trim() : null;
}

/** Starts a window; `read()` gives each service's share of one core since then. */
export function infraCpu() {
  const pids = { ferretdb: pidOf('ferretdb'), kafka: pidOf('kafka') };
  const start = Object.fromEntries(Object.entries(pids).map(([k, pid]) => [k, pid ? ticks(pid) : null]));
  const t0 = performance.now();
  return {
    read() {
      const seconds = (performance.now() - t0) / 1000;
      const out = {};
      for (const [k, pid] of Object.entries(pids)) {
        const now = pid ? ticks(pid) : null;
        out[k] = now === null || start[k] === null ? null : Math.round(((now - start[k]) / TICKS / seconds) * 100) / 100;
      }
      return out;
    },
  };
}
