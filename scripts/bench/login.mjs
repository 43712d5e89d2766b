#!/usr/bin/env node
// Login cost at the OWASP scrypt floor (N=2^17, r=8, p=1), and what concurrent
// logins do to the libuv threadpool the rest of the process shares (fs,
// dns.lookup, zlib).
//
//   node scripts/bench/login.mjs                         the default matrix
//   node scripts/bench/login.mjs --pools 4,8 --caps 2,4,64 --concurrency 1,4,16 --n 131072
//
// For each (UV_THREADPOOL_SIZE, PASSWORD_HASH_CONCURRENCY cap) it starts a
// child process (the pool size is fixed when the pool starts) that runs
// `concurrency` clients, each checking a password in a loop through the API's
// PasswordHasher (exactly what POST /api/auth/login runs), while a probe
// times an fs.stat (a threadpool task) every 20 ms. Prints one line per
// concurrency: login p50/p99 and the probe's p50/p99.
import { spawnSync } from 'node:child_process';
import { statSync } from 'node:fs';
import { stat } from 'node:fs/promises';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const list = (s) => s.split(',').map(Number);
const { values: opts } = parseArgs({
  options: {
    pools: { type: 'string', default: '4,8' },
    caps: { type: 'string', default: '2,4,64' },
    concurrency: { type: 'string', default: '1,4,16' },
    n: { type: 'string', default: String(2 ** 17) },
    child: { type: 'boolean', default: false },
    cap: { type: 'string', default: '2' },
  },
});

function pct(sorted, p) {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}
const ms = (v) => (Number.isNaN(v) ? '-' : v >= 100 ? v.toFixed(0) : v.toFixed(1));

async function child() {
  const { PasswordHasher, SCRYPT_PARAMS } = await import(join(root, 'api/src/features/auth/passwords.ts'));
  const cap = Number(opts.cap);
  const hasher = new PasswordHasher({ ...SCRYPT_PARAMS, N: Number(opts.n) }, cap);
  const stored = await hasher.hash('bench-password-1234');
  for (const c of list(opts.concurrency)) {
    const rounds = Math.max(6, 2 * c);
    const logins = [];
    const probes = [];
    let done = false;
    const probeLoop = (async () => {
      while (!done) {
        const t = performance.now();
        await stat(root);
        probes.push(performance.now() - t);
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    let next = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: c }, async () => {
        while (next++ < rounds) {
          const t = performance.now();
          if (!(await hasher.verify('bench-password-1234', stored))) throw new Error('verify failed');
          logins.push(performance.now() - t);
        }
      }),
    );
    const wall = (performance.now() - t0) / 1000;
    done = true;
    await probeLoop;
    logins.sort((x, y) => x - y);
    probes.sort((x, y) => x - y);
    const rss = process.memoryUsage().rss / 1024 / 1024;
    console.log(
      `pool ${String(process.env.UV_THREADPOOL_SIZE ?? 4).padStart(2)}  cap ${String(cap).padStart(2)}  concurrent ${String(c).padStart(2)}  ` +
        `login p50 ${ms(pct(logins, 50)).padStart(5)} ms  p99 ${ms(pct(logins, 99)).padStart(5)} ms  ` +
        `${(rounds / wall).toFixed(2)} logins/s  threadpool probe (fs.stat) p50 ${ms(pct(probes, 50)).padStart(5)} ms  p99 ${ms(pct(probes, 99)).padStart(5)} ms  rss ${rss.toFixed(0)} MB`,
    );
  }
}

if (opts.child) {
  await child();
} else {
  statSync(root);
  console.log(`scrypt N=${opts.n}, r=8, p=1 on ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? '?'}), node ${process.version}`);
  for (const pool of list(opts.pools)) {
    for (const cap of list(opts.caps)) {
      const args = ['--import', 'tsx', fileURLToPath(import.meta.url), '--child', '--cap', String(cap), '--n', opts.n, '--concurrency', opts.concurrency];
      const res = spawnSync(process.execPath, args, { cwd: root, env: { ...process.env, UV_THREADPOOL_SIZE: String(pool) }, stdio: 'inherit' });
      if (res.status !== 0) process.exit(res.status ?? 1);
    }
  }
}
