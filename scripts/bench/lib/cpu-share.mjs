// Where the machine's CPU goes during a measurement: cores used by each named
// process (all its threads, from /proc/<pid>/stat) and by the whole machine
// (/proc/stat), over the same interval; FerretDB and Kafka found through the
// pid files of scripts/infra. Linux only; elsewhere it reports nothing.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { infraRunDir } from './paths.mjs';

let clockTicks;
/** Clock ticks per second (`getconf CLK_TCK`), the unit of processTicks and machineTicks. */
export function ticksPerSecond() {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

/** utime + stime of a process (every thread), in clock ticks; undefined once it is gone. */
export function processTicks(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces: fields are counted after its closing parenthesis.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return undefined;
  }
}

/** The whole machine's busy and total clock ticks since boot (/proc/stat); undefined where there is none. */
export function machineTicks() {
  try {
    const cpu = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    const idle = cpu[3] + (cpu[4] ?? 0);
    const total = cpu.slice(0, 8).reduce((a, b) => a + b, 0);
    return { busy: total - idle, total };
  } catch {
    return undefined;
  }
}


/** The local FerretDB's and Kafka's pids, from the pid files scripts/infra/up.sh writes (undefined: not found). */
export function servicePids() {
  const pidOf = (name) => {
    const file = join(infraRunDir, `${name}.pid`);
    return existsSync(file) ? Number(readFileSync(file, 'utf8').trim()) || undefined : undefined;
  };
  return { ferretdb: pidOf('ferretdb'), kafka: pidOf('kafka') };
}

/** Starts a window over FerretDB and Kafka; `read()` gives each one's cores used since then (null: not found). */
export function infraCpu() {
  const pids = servicePids();
  const share = cpuShare(pids);
  return {
    read() {
      const { processes } = share.stop();
      return Object.fromEntries(Object.keys(pids).map((k) => [k, processes[k] ?? null]));
    },
  };
}

/**
 * Starts measuring. `processes` maps a name to a pid (undefined: left out).
 * stop() returns { seconds, machine, processes: { name: cores } }: cores used
 * on average over the interval (1.0 = one core busy throughout).
 */
export function cpuShare(processes) {
  const started = performance.now();
  const machine0 = machineTicks();
  const start = Object.fromEntries(Object.entries(processes).filter(([, pid]) => pid !== undefined).map(([name, pid]) => [name, { pid, ticks: processTicks(pid) }]));
  return {
    stop() {
      const seconds = (performance.now() - started) / 1000;
      const hz = ticksPerSecond();
      const cores = (ticks) => Math.round((ticks / hz / seconds) * 100) / 100;
      const out = {};
      for (const [name, { pid, ticks }] of Object.entries(start)) {
        const now = processTicks(pid);
        if (ticks !== undefined && now !== undefined) out[name] = cores(now - ticks);
      }
      const machine1 = machineTicks();
      // /proc/stat counts every CPU: its busy share times the CPU count is the cores in use.
      const machine = machine0 && machine1 ? Math.round(((machine1.busy - machine0.busy) / Math.max(1, machine1.total - machine0.total)) * cpus().length * 100) / 100 : undefined;
      return { seconds: Math.round(seconds * 10) / 10, machine, processes: out };
    },
  };
}

/** `api 0.82, kafka 0.41, … (machine 1.97 of 2 cores)` */
export function formatShare(share) {
  const parts = Object.entries(share.processes).map(([name, cores]) => `${name} ${cores.toFixed(2)}`);
  return `${parts.join(', ')}${share.machine === undefined ? '' : ` (machine ${share.machine.toFixed(2)} cores busy)`}`;
}

/**
 * Waits until the machine is quiet (fewer than `cores` busy over a second),
 * at most `maxMs`: what an earlier load left to do (the materializer's backlog,
 * the broker's flushes) must not run during the next measurement. Returns the
 * milliseconds waited and whether it settled.
 */
export async function settle({ cores = 0.4, maxMs = 120_000 } = {}) {
  const started = performance.now();
  for (;;) {
    const share = cpuShare({});
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const { machine } = share.stop();
    const waited = Math.round(performance.now() - started);
    if (machine === undefined || machine < cores) return { waitedMs: waited, settled: true };
    if (waited >= maxMs) return { waitedMs: waited, settled: false, busy: machine };
  }
}
