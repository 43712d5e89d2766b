// Where the machine's CPU goes during a measurement: cores used by each named
// process (all its threads, from /proc/<pid>/stat) and by the whole machine
// (/proc/stat), over the same interval. Linux only; elsewhere it reports nothing.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { cpus } from 'node:os';

let clockTicks;
function ticksPerSecond() {
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
function processTicks(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces: fields are counted after its closing parenthesis.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return undefined;
  }
}

function machineTicks() {
  try {
    const cpu = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    const idle = cpu[3] + (cpu[4] ?? 0);
    const total = cpu.slice(0, 8).reduce((a, b) => a + b, 0);
    return { busy: total - idle, total };
  } catch {
    return undefined;
  }
}

/** The pid of the process listening on a local TCP port (Kafka's, FerretDB's), found through /proc; undefined when not found. */
export function listenerPid(port) {
  const inodes = new Set();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text;
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols.length < 10 || cols[3] !== '0A') continue; // 0A: LISTEN
      if (parseInt(cols[1].split(':')[1], 16) === Number(port)) inodes.add(`socket:[${cols[9]}]`);
    }
  }
  if (inodes.size === 0) return undefined;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let fds;
    try {
      fds = readdirSync(`/proc/${entry}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        if (inodes.has(readlinkSync(`/proc/${entry}/fd/${fd}`))) return Number(entry);
      } catch {
        // closed meanwhile
      }
    }
  }
  return undefined;
}

/** The port of a `host:port` list's first entry or of a mongodb:// URL. */
export function portOf(address) {
  const m = /:(\d+)/.exec(address.replace(/^[a-z+]+:\/\/(?:[^@/]*@)?/, ''));
  return m ? Number(m[1]) : undefined;
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
