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
import { infraCpu } from '../lib/infra-cpu.mjs';
import { median } from '../lib/stats.mjs';

export const title = 'Polling (GET /api/v1/events?limit=100 with old cursors, account with 10,000 / 100,000 / 1,000,000 events)';
/** The account's history grows through these sizes; pages are measured at each (quick: the first two). */
const SIZES = [10_000, 100_000, 1_000_000];
const CONNECTIONS = 2;
/** A page slower than this is reported as a lower bound (the bench's time budget). */
const PAGE_BUDGET_MS = 60_000;

const cursorOf = (partition, offset) => 'c1_' + Buffer.from(`${partition}.${offset}`).toString('base64url');

export async function run(ctx) {
  const seconds = ctx.quick ? 5 : 8;
  const sizes = ctx.quick ? SIZES.slice(0, 2) : SIZES;
  const topic = ctx.topic('polling');
  // A database of its own: the account's events are the whole store, not added to what the other scenarios left.
  const db = `${ctx.db}_polling`;
  ctx.extraDatabases.push(db);
  const api = await startApi(ctx, { name: 'api', topic, env: { MONGO_DB: db } });
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
  await Promise.all([api.child.stop(), cannon.stop(), raw.stop()]);
  const at = (size) => bySize.find((x) => x.size === size);
  const mid = at(100_000) ?? bySize.at(-1);
  return {
    rows: [
      { id: 'polling.pages', label: `6 polling pages/s (limit=100, ${mid.size.toLocaleString('en')} events, ${CONNECTIONS} conns)`, value: mid.pages, unit: 'pages/s', reference: { label: 'same _id lookups via the driver', value: mid.driver, unit: 'pages/s' }, ratio: mid.pages / mid.driver },
      ...bySize.map((x) => ({ id: `polling.p99.${x.size}`, label: `6 history page p99 (p50) at ${x.size.toLocaleString('en')} events`, value: x.p99, unit: `ms (p50 ${x.p50} ms)`, reference: null, ratio: null })),
      { id: 'polling.index', label: '6 explain: index used for the page query', value: plan.indexUsed ? 1 : 0, unit: plan.indexUsed ? '(yes)' : `(no: ${plan.summary})`, reference: null, ratio: null },
    ],
    samples: { bySize },
    notes: { sizes, plan },
  };
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
