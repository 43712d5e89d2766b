// Bytes per held reader: heap held by one API process per waiting
// long-poll and per open SSE stream, each kind measured alone, after a full
// garbage collection before and after opening them (so churn and GC headroom,
// which RSS in scenario 4 includes, do not count). Part of a full run; alone:
// `npm run bench -- --only waiter-bytes`.
import { join } from 'node:path';
import { ensureAccounts, split } from '../lib/accounts.mjs';
import { benchDir } from '../lib/paths.mjs';
import { startNode } from '../lib/proc.mjs';
import { startApi } from '../lib/services.mjs';
import { sleep } from '../lib/stats.mjs';

export const title = 'Bytes per held reader (long-poll, SSE stream), heap after GC';
const ACCOUNTS = 100;
const LONG_POLLS = 20; // per account: 2,000
const STREAMS = 6; // per account: 600
const WORKERS = 2;

export async function run(ctx) {
  const topic = ctx.topic('waiter-bytes');
  const a = await startApi(ctx, { name: 'api-a', topic, execArgv: ['--expose-gc'] });
  const accounts = await ensureAccounts(ctx, a.url, ACCOUNTS);
  const per = {};
  for (const [kind, longPolls, streams] of [['longpoll', LONG_POLLS, 0], ['stream', 0, STREAMS]]) {
    const workers = split(accounts, WORKERS).map((group, i) => ({ group, child: startNode(`bytes-${kind}-${i}`, [join(benchDir, 'workers', 'waiters.mjs')], { logFile: join(ctx.scratch, `waiter-bytes-${kind}-${i}.log`) }) }));
    const before = await heap(a);
    const base = ctx.profiling ? (await a.child.request('heapSnapshot', { file: join(ctx.scratch, `waiter-bytes-${kind}-base.heapsnapshot`) }, 300_000)).file : null;
    await Promise.all(workers.map((w) => w.child.request('open', { url: a.url, accounts: w.group.map(({ id, token }) => ({ id, credential: token })), longPolls, streams, timeoutMs: 55_000 }, 300_000)));
    const want = ACCOUNTS * (longPolls + streams);
    const held = await waitServer(a.url, kind, want, 60_000);
    await sleep(2000);
    const after = await heap(a);
    const bytes = (after.heapUsed - before.heapUsed) / held;
    per[kind] = { held, bytes, heapBefore: before.heapUsed, heapAfter: after.heapUsed, rssBefore: before.rss, rssAfter: after.rss };
    ctx.log(`${kind}: ${held} held, ${bytes.toFixed(0)} heap bytes each (heap ${(before.heapUsed / 2 ** 20).toFixed(1)} -> ${(after.heapUsed / 2 ** 20).toFixed(1)} MB)`);
    if (ctx.profiling) {
      const snap = await a.child.request('heapSnapshot', { file: join(ctx.scratch, `waiter-bytes-${kind}.heapsnapshot`) }, 300_000);
      ctx.log(`heap snapshot: node scripts/bench/heap-summary.mjs ${snap.file} --per ${held} --base ${base}`);
    }
    await Promise.all(workers.map((w) => w.child.request('close')));
    await Promise.all(workers.map((w) => w.child.stop()));
    await sleep(3000);
  }
  await a.child.stop();
  return {
    rows: [
      { id: 'bytes.longpoll', label: 'heap bytes per held long-poll', value: per.longpoll.bytes, unit: 'B', reference: null, ratio: null },
      { id: 'bytes.stream', label: 'heap bytes per open SSE stream', value: per.stream.bytes, unit: 'B', reference: null, ratio: null },
    ],
    notes: per,
  };
}

async function heap(api) {
  await api.child.request('gc');
  await sleep(200);
  await api.child.request('gc');
  return api.child.request('stats', { reset: false });
}

async function waitServer(url, kind, want, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  const gauge = kind === 'longpoll' ? 'long_polls_open' : 'streams_open';
  let quiet = 0;
  let last = -1;
  for (;;) {
    await sleep(1000);
    const text = await (await fetch(`${url}/metrics`)).text();
    const n = Number(text.match(new RegExp(`^${gauge} (\\d+)`, 'm'))?.[1] ?? 0);
    quiet = n === last ? quiet + 1 : 0;
    last = n;
    if ((n >= want && quiet >= 1) || Date.now() > deadline) return n;
  }
}
