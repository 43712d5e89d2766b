// Scenario 4: idle capacity of ONE API process: 10,000 long-polls and 3,000
// SSE streams (500 accounts, 6 streams each: MAX_STREAMS_PER_ACCOUNT) held
// open at once. Reported: the process's RSS and event-loop delay p99 while it
// holds them, then one event per account (ingested through a second process)
// must reach every long-poll and every stream. Reference: a bare Koa app
// holding the same number of unanswered requests.
import { join } from 'node:path';
import { ensureAccounts, split } from '../lib/accounts.mjs';
import { benchDir } from '../lib/paths.mjs';
import { freePort, startNode } from '../lib/proc.mjs';
import { INGEST_TOKEN, startApi } from '../lib/services.mjs';
import { infraCpu } from '../lib/cpu-share.mjs';
import { median, sleep } from '../lib/stats.mjs';

export const title = 'Idle capacity (10,000 long-polls + 3,000 streams on one API process)';
const ACCOUNTS = 500;
const LONG_POLLS = 20; // per account: 10,000
const STREAMS = 6; // per account: 3,000
const WORKERS = 4;
const MB = 2 ** 20;

export async function run(ctx) {
  const topic = ctx.topic('idle');
  // --expose-gc only so the bench can ask for one full collection at the end (what is live, not headroom).
  const [a, b] = await Promise.all([startApi(ctx, { name: 'api-a', topic, execArgv: ['--expose-gc'] }), startApi(ctx, { name: 'api-b', topic })]);
  const accounts = await ensureAccounts(ctx, b.url, ACCOUNTS);
  const baseline = await a.child.request('stats', { reset: true });
  const spawnWorkers = (label) =>
    split(accounts, WORKERS).map((group, i) => ({ group, child: startNode(`${label}-${i}`, [join(benchDir, 'workers', 'waiters.mjs')], { logFile: join(ctx.scratch, `idle-${label}-${i}.log`) }) }));

  // --- ours
  const workers = spawnWorkers('waiters');
  const t0 = Date.now();
  const openInfra = infraCpu();
  await Promise.all(workers.map((w) => w.child.request('open', { url: a.url, accounts: w.group.map(({ id, token }) => ({ id, credential: token })), longPolls: LONG_POLLS, streams: STREAMS }, 300_000)));
  // Held = registered by the server (its long_polls_open and streams_open gauges), not merely sent:
  // on a slow store, requests can wait in authentication long after the client sent them.
  const reached = await waitHeld(ctx, workers, a, ACCOUNTS * STREAMS, ctx.quick ? 90_000 : 120_000, ACCOUNTS * LONG_POLLS, a.url);
  const openSeconds = (Date.now() - t0) / 1000;
  const openCpu = { ...openInfra.read(), api: (await a.child.request('stats', { reset: false })).cpu };
  ctx.log(`held after ${openSeconds.toFixed(0)} s: ${reached.longpoll} long-polls and ${reached.stream} streams registered by the server; FerretDB CPU while opening ${(openCpu.ferretdb * 100).toFixed(0)}%`);

  // Idle: what holding them costs. Several samples, the median reported.
  const samples = [];
  await a.child.request('stats', { reset: true });
  for (let i = 0; i < (ctx.quick ? 2 : 3); i++) {
    await sleep(3000);
    samples.push(await a.child.request('stats', { reset: true }));
  }
  const held = await Promise.all(workers.map((w) => w.child.request('status')));
  // What of the RSS is live and what is the collector's headroom: one full collection, then RSS again.
  const collected = await a.child.request('gc');
  await sleep(1000);
  const afterGc = await a.child.request('stats', { reset: true });

  // Release: one event per account through B; every reader must get it.
  const pacer = startNode('pacer', [join(benchDir, 'workers', 'pacer.mjs')], { logFile: join(ctx.scratch, 'idle-pacer.log') });
  const probe = 1;
  const sent = await ctx.profiled(a.child, 'release', async () => {
    const r = await pacer.request('burst', { url: b.url, token: INGEST_TOKEN, accounts: accounts.map((x) => x.id), extra: { probe } });
    await waitProbe(workers, probe, 20_000);
    return r;
  });
  const releasedAfter = Date.now() - sent.sentAt;
  const got = await Promise.all(workers.map((w) => w.child.request('probed', { marker: probe })));
  const releaseStats = await a.child.request('stats', { reset: true });
  const sum = (kind, field) => got.reduce((s, g) => s + g[field][kind], 0);
  ctx.log(`released: ${sum('longpoll', 'got')}/${sum('longpoll', 'total')} long-polls, ${sum('stream', 'got')}/${sum('stream', 'total')} streams within ${releasedAfter.toFixed(0)} ms; loop delay p99 during release ${releaseStats.eld.p99} ms`);
  if (ctx.profiling) {
    // --profile idle: what each held reader costs, from a heap snapshot (it blocks the process for
    // a minute or more, so it is taken once everything above is measured, the readers still held).
    await sleep(5000);
    const open = await serverHeld(a.url);
    const snap = await a.child.request('heapSnapshot', { file: join(ctx.scratch, 'idle-api-a-held.heapsnapshot') }, 600_000);
    ctx.log(`heap snapshot written with ${open.longpoll} long-polls and ${open.stream} streams held: ${snap.file} (RSS after it ${(snap.rss / MB).toFixed(0)} MB); summary: node scripts/bench/heap-summary.mjs ${snap.file} --per ${open.longpoll + open.stream}`);
  }
  await Promise.all(workers.map((w) => w.child.request('close')));
  await Promise.all([a.child.stop(), b.child.stop(), pacer.stop(), ...workers.map((w) => w.child.stop())]);

  // --- reference: a bare Koa app holding the same number of unanswered requests
  const port = await freePort();
  const koa = startNode('bare-koa-hold', [join(benchDir, 'workers', 'bare-koa.mjs')], { env: { PORT: String(port), HOLD: '1' }, probe: true, logFile: join(ctx.scratch, 'idle-bare-koa.log') });
  await sleep(1000);
  const refBaseline = await koa.request('stats', { reset: true });
  const refWorkers = spawnWorkers('hold');
  await Promise.all(refWorkers.map((w) => w.child.request('open', { url: `http://127.0.0.1:${port}`, accounts: w.group.map(({ id }) => ({ id })), longPolls: LONG_POLLS, streams: STREAMS, hold: true }, 300_000)));
  await waitHeld(ctx, refWorkers, { child: koa }, ACCOUNTS * STREAMS, 60_000, ACCOUNTS * LONG_POLLS);
  await koa.request('stats', { reset: true });
  const refSamples = [];
  for (let i = 0; i < 1; i++) {
    await sleep(2000);
    refSamples.push(await koa.request('stats', { reset: true }));
  }
  await Promise.all(refWorkers.map((w) => w.child.request('close')));
  await Promise.all([koa.stop(), ...refWorkers.map((w) => w.child.stop())]);

  const rss = median(samples.map((s) => s.rss)) / MB;
  const refHeld = median(refSamples.map((s) => s.rss)) - refBaseline.rss;
  ctx.log(
    `RSS at rest: ours ${(baseline.rss / MB).toFixed(0)} MB, bare Koa ${(refBaseline.rss / MB).toFixed(0)} MB; bare Koa holding adds ${(refHeld / MB).toFixed(0)} MB ` +
      `(floor for ours ${((baseline.rss + refHeld) / MB).toFixed(0)} MB); ours holding ${rss.toFixed(0)} MB, heap used ${(median(samples.map((s) => s.heapUsed)) / MB).toFixed(0)} MB; ` +
      `after one full collection RSS ${(afterGc.rss / MB).toFixed(0)} MB, heap used ${(afterGc.heapUsed / MB).toFixed(0)} MB`,
  );
  const eld = median(samples.map((s) => s.eld.p99));
  const refRss = median(refSamples.map((s) => s.rss)) / MB;
  const refEld = median(refSamples.map((s) => s.eld.p99));
  const lpGot = sum('longpoll', 'got');
  const stGot = sum('stream', 'got');
  const lpTotal = sum('longpoll', 'total');
  const stTotal = sum('stream', 'total');
  const pending = held.reduce((s, h) => s + h.open.longpoll, 0);
  const streamsOpen = held.reduce((s, h) => s + h.open.stream, 0);
  return {
    rows: [
      { id: 'idle.rss', label: `4 RSS holding ${pending} long-polls + ${streamsOpen} streams`, value: rss, unit: 'MB', reference: { label: 'bare Koa holding as many requests', value: refRss, unit: 'MB' }, ratio: rss / refRss, target: { valueAtMost: 300, unit: 'MB' } },
      { id: 'idle.eld', label: '4 event-loop delay p99 while holding them', value: eld, unit: 'ms', reference: { label: 'bare Koa, same', value: refEld, unit: 'ms' }, ratio: eld / refEld },
      { id: 'idle.released', label: '4 readers released by one event per account', value: lpGot + stGot, unit: `of ${lpTotal + stTotal}`, reference: null, ratio: (lpGot + stGot) / (lpTotal + stTotal), target: { valueAtLeast: lpTotal + stTotal, unit: '' } },
    ],
    notes: {
      baselineRssMb: baseline.rss / MB,
      // The floor the RSS goal meets: ours at rest plus what bare Koa adds to hold as many readers.
      refBaselineRssMb: refBaseline.rss / MB,
      floorRssMb: (baseline.rss + (median(refSamples.map((s) => s.rss)) - refBaseline.rss)) / MB,
      afterFullGc: { rssMb: afterGc.rss / MB, heapUsedMb: afterGc.heapUsed / MB, rssRightAfterMb: collected.rss / MB },
      openSeconds,
      infraCpuWhileOpening: openCpu,
      releasedWithinMs: releasedAfter,
      released: { longpoll: `${lpGot}/${lpTotal}`, stream: `${stGot}/${stTotal}` },
      eldP99DuringReleaseMs: releaseStats.eld.p99,
      heldCounters: held,
      samples,
      refSamples,
    },
  };
}

/** Waits until the streams are open and the API has gone quiet (every pending long-poll registered). */
/** The API's own count of registered long-polls and streams, from its /metrics. */
async function serverHeld(url) {
  const text = await (await fetch(`${url}/metrics`)).text();
  const gauge = (name) => Number(text.match(new RegExp(`^${name} (\\d+)`, 'm'))?.[1] ?? 0);
  return { longpoll: gauge('long_polls_open'), stream: gauge('streams_open') };
}

async function waitHeld(ctx, workers, api, streams, timeoutMs, longPolls = 0, serverUrl = null) {
  const deadline = Date.now() + timeoutMs;
  let quiet = 0;
  for (;;) {
    await sleep(1000);
    const st = await Promise.all(workers.map((w) => w.child.request('status')));
    const open = serverUrl ? await serverHeld(serverUrl) : { longpoll: st.reduce((s, x) => s + x.open.longpoll, 0), stream: st.reduce((s, x) => s + x.open.stream, 0) };
    const cpu = (await api.child.request('stats', { reset: true })).cpu;
    quiet = open.stream >= streams && open.longpoll >= longPolls && (serverUrl || cpu < 0.15) ? quiet + 1 : 0;
    if (quiet >= 2) return open;
    if (Date.now() > deadline) {
      ctx.log(`not all held within ${timeoutMs / 1000} s: ${JSON.stringify(open)}, API CPU ${(cpu * 100).toFixed(0)}% (${st.map((x) => x.lastError).filter(Boolean)[0] ?? 'no reader error'})`);
      return open;
    }
  }
}

async function waitProbe(workers, probe, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const got = await Promise.all(workers.map((w) => w.child.request('probed', { marker: probe })));
    const missing = got.reduce((s, g) => s + (g.total.longpoll - g.got.longpoll) + (g.total.stream - g.got.stream), 0);
    if (missing === 0 || Date.now() > deadline) return;
    await sleep(100);
  }
}
