// Scenario 3: live latency. 1,000 long-polls and 500 SSE streams wait on API
// process A, spread over 100 accounts; events are ingested through API
// process B at a steady rate. Latency = from the moment the ingest request is
// sent (data.t) to the moment the reader has the event. Reference: Kafka's
// own produce-to-consume latency on the same broker.
import { join } from 'node:path';
import { ensureAccounts } from '../lib/accounts.mjs';
import { benchDir } from '../lib/paths.mjs';
import { startNode } from '../lib/proc.mjs';
import { kafkaEndToEnd } from '../lib/refs.mjs';
import { INGEST_TOKEN, startApi } from '../lib/services.mjs';
import { infraCpu } from '../lib/cpu-share.mjs';
import { median, percentile, sleep } from '../lib/stats.mjs';

export const title = 'Live latency (ingest on B -> long-poll / SSE on A)';
const ACCOUNTS = 100;
const LONG_POLLS = 10; // per account: 1,000
const STREAMS = 5; // per account: 500
// events/s: one per account every 10 s, so 150 live deliveries/s. Each released
// long-poll comes back authenticated (two MongoDB operations); on the test
// server (FerretDB/SQLite) much more than this saturates the store.
const RATE = 10;

export async function run(ctx) {
  const seconds = ctx.quick ? 5 : 6;
  const topic = ctx.topic('live');
  const [a, b] = await Promise.all([startApi(ctx, { name: 'api-a', topic }), startApi(ctx, { name: 'api-b', topic })]);
  const accounts = await ensureAccounts(ctx, b.url, ACCOUNTS);
  // The long-polls in one process, the streams in another: a process stands in for many clients and
  // handles their answers one after another, so an SSE reader would otherwise wait for the bench to handle
  // its account's ten long-poll answers (and ask again) before its own bytes are read.
  const kinds = [
    { longPolls: LONG_POLLS, streams: 0 },
    { longPolls: 0, streams: STREAMS },
  ];
  const workers = kinds.map((kind, i) => ({
    group: accounts,
    ...kind,
    child: startNode(`waiters-${i}`, [join(benchDir, 'workers', 'waiters.mjs')], { logFile: join(ctx.scratch, `live-waiters-${i}.log`) }),
  }));
  const pacer = startNode('pacer', [join(benchDir, 'workers', 'pacer.mjs')], { logFile: join(ctx.scratch, 'live-pacer.log') });

  await Promise.all(workers.map((w) => w.child.request('open', { url: a.url, accounts: w.group.map(({ id, token }) => ({ id, credential: token })), longPolls: w.longPolls, streams: w.streams })));
  await waitOpen(ctx, workers, ACCOUNTS * STREAMS);
  const ids = accounts.map((acc) => acc.id);

  const window = async (secs, label) => {
    await Promise.all(workers.map((w) => w.child.request('take')));
    await a.child.request('stats', { reset: true });
    if (ctx.options.liveSteps) await Promise.all([a, b].map((s) => s.child.request('liveSteps', { on: true })));
    const infra = infraCpu();
    await ctx.profiled(a.child, label, async () => {
      await pacer.request('start', { url: b.url, token: INGEST_TOKEN, rate: RATE, seconds: secs, accounts: ids });
      window.last = await pacer.request('finish', {}, (secs + 60) * 1000);
    });
    await sleep(1000);
    const taken = await Promise.all(workers.map((w) => w.child.request('take')));
    const server = await a.child.request('stats', { reset: true });
    const lp = taken.flatMap((t) => t.latency.longpoll);
    const st = taken.flatMap((t) => t.latency.stream);
    const sent = window.last.sent;
    const steps = ctx.options.liveSteps ? await liveSteps(b, a, window.last.acks, lp, st) : undefined;
    return {
      longpoll: { p50: percentile(lp, 50), p95: percentile(lp, 95), p99: percentile(lp, 99), received: lp.length, expected: sent * LONG_POLLS },
      stream: { p50: percentile(st, 50), p95: percentile(st, 95), p99: percentile(st, 99), received: st.length, expected: sent * STREAMS },
      ingestErrors: window.last.errors,
      readerErrors: taken.reduce((s, t) => s + t.errors, 0),
      cpuA: server.cpu,
      eldP99A: server.eld.p99,
      infraCpu: infra.read(),
      steps,
    };
  };

  ctx.log('warming up');
  await window(3, 'warmup');
  const runs = [];
  for (let r = 0; r < ctx.runs; r++) {
    const m = await window(seconds, `run-${r}`);
    runs.push(m);
    ctx.log(
      `${m.steps ? `steps (ms since sent, p50/p99):\n${m.steps.map((x) => `  ${x.step.padEnd(20)} ${x.p50.toFixed(1).padStart(6)} ${x.p99.toFixed(1).padStart(6)}  (${x.n})`).join('\n')}\n` : ''}run ${r + 1}: long-poll p50/p95/p99 ${fmt(m.longpoll)} ms (${m.longpoll.received}/${m.longpoll.expected}); SSE ${fmt(m.stream)} ms (${m.stream.received}/${m.stream.expected}); A CPU ${(m.cpuA * 100).toFixed(0)}%, FerretDB ${(m.infraCpu.ferretdb * 100).toFixed(0)}%, loop delay p99 ${m.eldP99A} ms; errors ${m.ingestErrors}/${m.readerErrors}`,
    );
  }
  await Promise.all(workers.map((w) => w.child.request('close')));
  await Promise.all([a.child.stop(), b.child.stop(), pacer.stop(), ...workers.map((w) => w.child.stop())]);
  const e2e = await kafkaEndToEnd(ctx);
  const med = (kind, p) => median(runs.map((m) => m[kind][p]));
  const ref = (p) => ({ label: `Kafka EndToEndLatency ${p === 'p95' ? 'p99' : p}`, value: p === 'p50' ? e2e.p50 : e2e.p99, unit: 'ms' });
  const rows = [];
  for (const [kind, name] of [['longpoll', 'long-poll released'], ['stream', 'SSE event received']]) {
    for (const p of ['p50', 'p95', 'p99']) {
      const value = med(kind, p);
      const r = ref(p);
      rows.push({ id: `live.${kind}.${p}`, label: `3 live ${name} ${p}`, value, unit: 'ms', reference: r, ratio: value / r.value, ...(p === 'p99' ? { target: { valueAtMost: 50, unit: 'ms' } } : {}) });
    }
  }
  return { rows, runs, notes: { accounts: ACCOUNTS, longPolls: ACCOUNTS * LONG_POLLS, streams: ACCOUNTS * STREAMS, rate: RATE, seconds } };
}

/**
 * Each step of a live event's path (--live-steps): ms from data.t (the ingest request sent) to the step,
 * p50/p99 over the window, in path order. The services' steps come from their probes (api/src/live/live-trace.ts);
 * a step marked + is timed within API process A from the fan-out having the record (one clock, one process).
 */
async function liveSteps(ingest, readers, acks, lp, st) {
  const merged = {};
  // B's own fan-out steps (it holds no reader) are left out: the ingest steps from B, the rest from A.
  for (const [k, v] of Object.entries(await ingest.child.request('liveSteps', { on: false }))) if (k.startsWith('ingest.')) merged[k] = v;
  for (const [k, v] of Object.entries(await readers.child.request('liveSteps', { on: false }))) if (!k.startsWith('ingest.')) merged[k] = v;
  merged['ingest.answered'] = acks.map(([, sent, acked]) => acked - sent);
  merged['client.longpoll'] = lp;
  merged['client.sse'] = st;
  const order = ['ingest.produce', 'kafka.timestamp', 'ingest.produced', 'ingest.answered', 'fanout.batch', 'fanout.dispatched', 'longpoll.written', 'client.longpoll', 'sse.written', 'client.sse', '+fanout.dispatched', '+longpoll.written', '+sse.written'];
  return Object.entries(merged)
    .filter(([, v]) => v.length > 0)
    .sort(([x], [y]) => (order.indexOf(x) + 1 || 99) - (order.indexOf(y) + 1 || 99))
    .map(([step, v]) => ({ step, n: v.length, p50: percentile(v, 50), p99: percentile(v, 99) }));
}

const fmt = (x) => [x.p50, x.p95, x.p99].map((v) => (v === null ? '-' : v.toFixed(1))).join('/');

/** Until every stream is open (long-polls have no signal before release: the streams open last). */
export async function waitOpen(ctx, workers, streams, timeoutMs = 90_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const st = await Promise.all(workers.map((w) => w.child.request('status')));
    const open = st.reduce((s, x) => s + x.open.stream, 0);
    const lp = st.reduce((s, x) => s + x.open.longpoll, 0);
    if (open >= streams) {
      ctx.log(`${lp} long-polls pending, ${open} streams open`);
      await sleep(1000);
      return;
    }
    if (Date.now() > deadline) {
      ctx.log(`only ${open}/${streams} streams open after ${timeoutMs / 1000} s, ${lp} long-polls pending (${st.map((x) => x.lastError).filter(Boolean)[0] ?? 'no reader error'}); measuring with those`);
      return;
    }
    await sleep(500);
  }
}
