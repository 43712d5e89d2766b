// Scenario 6: pages/s and page latency (p50/p99) of GET /api/v1/events?limit=100
// (with `since` cursors spread over the range) on an account whose history grows
// through 10,000, 100,000 and 1,000,000 events, and the plan the server reports
// for the page query. Reference: the same _id lookups straight through the MongoDB
// driver at the same concurrency.
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { MongoClient } from 'mongodb';
import { call, createAccounts } from '../lib/http.mjs';
import { benchDir, root } from '../lib/paths.mjs';
import { startNode } from '../lib/proc.mjs';
import { INGEST_TOKEN, startApi } from '../lib/services.mjs';
import { infraCpu } from '../lib/cpu-share.mjs';
import { median } from '../lib/stats.mjs';
import { visibilityProbe } from '../lib/visibility.mjs';

export const title = 'Polling (GET /api/v1/events?limit=100 with old cursors, account with 10,000 / 100,000 / 1,000,000 events)';
/** The account's history grows through these sizes; pages are measured at each (quick: the first two). */
const SIZES = [10_000, 100_000, 1_000_000];
const CONNECTIONS = 2;
/** A page slower than this is reported as a lower bound (the bench's time budget). */
const PAGE_BUDGET_MS = 60_000;
/** Scenario 2's rate, for its figure with the largest history in the store. */
const VISIBILITY_RATE = 1000;

const cursorOf = (partition, offset) => 'c1_' + Buffer.from(`${partition}.${offset}`).toString('base64url');

export async function run(ctx) {
  const seconds = ctx.quick ? 5 : 8;
  const sizes = ctx.quick ? SIZES.slice(0, 2) : SIZES;
  const topic = ctx.topic('polling');
  // The scenario's own database (run.mjs): the account's events are the whole store, not added to what the other scenarios left.
  const db = ctx.db;
  const api = await startApi(ctx, { name: 'api', topic });
  // One account of its own, so its partition holds nothing else.
  const [account] = await createAccounts(api.url, 1, { prefix: `bench-${ctx.runId}-polling` });
  const first = await call(api.url, 'POST', '/internal/v1/events', { body: { account_id: account.id, type: 'message.received', data: { seq: -1 } }, headers: { authorization: `Bearer ${INGEST_TOKEN}` } });
  const [p, o] = Buffer.from(first.events[0].cursor.slice(3), 'base64url').toString().split('.').map(Number);
  const headers = { authorization: `Bearer ${account.key}` };
  const cannon = startNode('cannon', [join(benchDir, 'workers', 'cannon.mjs')], { logFile: join(ctx.scratch, 'polling-cannon.log') });
  const raw = startNode('mongo-pages', [join(benchDir, 'workers', 'mongo-pages.mjs')], { logFile: join(ctx.scratch, 'polling-mongo.log') });
  const base = o + 1000;
  let stored = 0;
  const bySize = [];
  let plan = null;
  for (const size of sizes) {
    // The fill goes around the log (fill-events.ts): the events and the account's streams, as the materializer writes them.
    const fill = await promisify(execFile)(process.execPath, ['--import', 'tsx', join(benchDir, 'workers', 'fill-events.ts'), ctx.services.MONGO_URL, db, topic, account.id, String(p), String(base + stored), String(size - stored)], { cwd: root, maxBuffer: 1 << 20 });
    const filled = JSON.parse(fill.stdout.trim().split('\n').at(-1));
    stored = size;
    ctx.log(`stored ${filled.inserted} more events for ${account.id} in ${filled.seconds.toFixed(1)} s (partition ${p}, ${size} in all)`);
    const offsets = Array.from({ length: 400 }, (_, i) => base + Math.floor(((i * 7919) % 400) * ((size - 200) / 400)));
    const paths = offsets.map((k) => `/api/v1/events?limit=100&since=${cursorOf(p, k)}`);
    plan = await explain(ctx, db, account.id, p, offsets[0]);
    ctx.log(`query plan at ${size}: ${plan.summary} (index used: ${plan.indexUsed})`);
    const t0 = performance.now();
    const check = await call(api.url, 'GET', paths[0], { headers, timeoutMs: PAGE_BUDGET_MS });
    const firstPageMs = performance.now() - t0;
    if (check.events.length !== 100) throw new Error(`a page has ${check.events.length} events, expected 100`);
    const runs = [];
    for (let r = 0; r < ctx.runs; r++) {
      const infra = infraCpu();
      await api.child.request('stats', { reset: true });
      const a = await ctx.profiled(api.child, `run-${size}-${r}`, () => cannon.request('run', { url: api.url, connections: CONNECTIONS, seconds, headers, paths, timeoutSeconds: 60 }, 600_000));
      const cpu = { api: (await api.child.request('stats', { reset: true })).cpu, ...infra.read() };
      const m = await raw.request('run', { url: ctx.services.MONGO_URL, db, accountId: account.id, partition: p, offsets, connections: CONNECTIONS, seconds }, 600_000);
      runs.push({ rps: a.non2xx + a.errors > 0 ? NaN : a.rps, p50: a.latency.p50, p99: a.latency.p99, driver: m.rps, cpu });
      ctx.log(`${size} events, run ${r + 1}: API ${a.rps.toFixed(1)} pages/s, p50 ${a.latency.p50} ms, p99 ${a.latency.p99} ms (non-2xx ${a.non2xx}, errors ${a.errors}); driver ${m.rps.toFixed(1)} pages/s; API CPU ${(cpu.api * 100).toFixed(0)}%, FerretDB ${(cpu.ferretdb * 100).toFixed(0)}%`);
    }
    bySize.push({ size, fillSeconds: filled.seconds, firstPageMs, pages: median(runs.map((x) => x.rps)), p50: median(runs.map((x) => x.p50)), p99: median(runs.map((x) => x.p99)), driver: median(runs.map((x) => x.driver)), plan: plan.summary, runs });
  }
  await Promise.all([cannon.stop(), raw.stop()]);
  // Scenario 2 again, now with the largest history in the store (the cost of a
  // request must not grow with the size of the store), on accounts of other partitions
  // (the fill moved partition p's watermark past offsets Kafka has not written).
  const visibility = await visibilityWithHistory(ctx, api, p, stored);
  await api.child.stop();
  const at = (size) => bySize.find((x) => x.size === size);
  const mid = at(100_000) ?? bySize.at(-1);
  return {
    rows: [
      { id: 'polling.pages', label: `6 polling pages/s (limit=100, ${mid.size.toLocaleString('en')} events, ${CONNECTIONS} conns)`, value: mid.pages, unit: 'pages/s', reference: { label: 'same _id lookups via the driver', value: mid.driver, unit: 'pages/s' }, ratio: mid.pages / mid.driver },
      ...bySize.map((x) => ({ id: `polling.p99.${x.size}`, label: `6 history page p99 (p50) at ${x.size.toLocaleString('en')} events`, value: x.p99, unit: `ms (p50 ${x.p50} ms)`, reference: null, ratio: null })),
      { id: 'polling.index', label: '6 explain: index used for the page query', value: plan.indexUsed ? 1 : 0, unit: plan.indexUsed ? '(yes)' : `(no: ${plan.summary})`, reference: null, ratio: null },
      { id: 'lag.store.p99', label: `2 visibility lag p99 @ ${VISIBILITY_RATE} ev/s, ${stored.toLocaleString('en')} events in the store`, value: visibility.p99, unit: visibility.censored ? 'ms (at least)' : `ms (p50 ${visibility.p50?.toFixed(1)} ms)`, reference: ctx.shared.lag ? { label: 'scenario 2 (a fresh store) p99', value: ctx.shared.lag.p99, unit: 'ms' } : null, ratio: ctx.shared.lag ? visibility.p99 / ctx.shared.lag.p99 : null, target: { valueAtMost: 100, unit: 'ms' } },
    ],
    samples: { bySize, visibility },
    notes: { sizes, plan },
  };
}

/** Scenario 2's measurement on this scenario's API and store: the median of ctx.runs windows. */
async function visibilityWithHistory(ctx, api, fullPartition, stored) {
  // Accounts whose events land on other partitions than the filled one (learnt from one event's cursor each).
  const candidates = await createAccounts(api.url, 12, { prefix: `bench-${ctx.runId}-visibility` });
  const others = [];
  for (const a of candidates) {
    const r = await call(api.url, 'POST', '/internal/v1/events', { body: { account_id: a.id, type: 'message.received', data: { seq: -1 } }, headers: { authorization: `Bearer ${INGEST_TOKEN}` } });
    const [partition] = Buffer.from(r.events[0].cursor.slice(3), 'base64url').toString().split('.').map(Number);
    if (partition !== fullPartition) others.push(a);
  }
  if (others.length < 3) throw new Error(`only ${others.length} of 12 accounts landed outside partition ${fullPartition}`);
  const polled = others.slice(0, 2);
  // As in scenario 2: the polled accounts get 40% of the events, the others the rest.
  const ids = [...polled.map((a) => a.id), ...polled.map((a) => a.id), ...others.slice(2).map((a) => a.id)];
  const probe = visibilityProbe(ctx, { api, polled, ids, rate: VISIBILITY_RATE, name: 'polling-visibility' });
  try {
    await probe.once(2, 'visibility-warmup');
    const runs = [];
    for (let r = 0; r < ctx.runs; r++) {
      const m = await probe.once(ctx.quick ? 5 : 8, `visibility-${r}`);
      runs.push(m);
      ctx.log(`visibility with ${stored} events in the store, run ${r + 1}: lag p50 ${m.p50?.toFixed(1)} ms, p99 ${m.p99?.toFixed(1)} ms over ${m.samples} polled events (${m.missing} never seen, ${m.errors} ingest errors)`);
    }
    return { p50: median(runs.map((m) => m.p50)), p99: median(runs.map((m) => m.p99)), censored: runs.some((m) => m.censored), runs };
  } finally {
    await probe.stop();
  }
}

/**
 * The server's plan for the page query: a page read is `_id` lookups of the
 * account stream's head and pages (event-store/pages.ts); explained here for
 * the page holding the cursor. MongoDB names IDHACK/EXPRESS_IXSCAN; FerretDB/SQLite
 * says SEARCH … USING INDEX (the `_id` index) when the filter is pushed down.
 */
async function explain(ctx, db, accountId, partition, offset) {
  const client = new MongoClient(ctx.services.MONGO_URL);
  try {
    const pages = client.db(db).collection('event_pages');
    const stream = `${encodeURIComponent(accountId)}:${partition}`;
    const head = await pages.findOne({ _id: `${stream}:h` });
    let k = 0;
    while (k + 1 < (head?.dirs.length ?? 0) && head.dirs[k + 1] <= offset) k++;
    const dir = await pages.findOne({ _id: `${stream}:d${k}` });
    let i = 0;
    while (i + 1 < (dir?.starts.length ?? 0) && dir.starts[i + 1] <= offset) i++;
    const out = await pages.find({ _id: `${stream}:${k * (head?.per_dir ?? 0) + i}` }).explain();
    const text = JSON.stringify(out.queryPlanner ?? out);
    const ferret = Array.isArray(out.queryPlanner?.Plan);
    const indexUsed = ferret ? /USING (COVERING )?INDEX/.test(text) : /IXSCAN|IDHACK|EXPRESS/.test(text);
    const summary = ferret ? `${out.queryPlanner.Plan.join('; ')}; filterPushdown ${out.filterPushdown}` : (out.queryPlanner?.winningPlan?.stage ?? 'plan') + (indexUsed ? ' by _id' : '');
    return { indexUsed, summary, raw: out.queryPlanner ?? out };
  } finally {
    await client.close();
  }
}
