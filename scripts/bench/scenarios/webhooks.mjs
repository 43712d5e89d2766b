// Scenario 5: webhook deliveries/s from one delivery process to a fast local
// HTTPS receiver; then the same with 20% of the subscriptions pointing at a
// receiver that never answers (each attempt runs into the 4 s timeout): the
// healthy receivers' throughput as a ratio to the all-healthy run. Latency
// (pacer's send to the receiver) at 100 and 1,000 events/s all healthy, and at
// 100 with 20% hanging. Each figure is the median of ctx.runs rounds (3 in a
// full run) with their spread. Reference: a bare Node HTTPS client at the
// delivery process's concurrency against the same receiver. 5e: retries
// through the retry store (a second delivery process with a 100 ms retry
// schedule; a receiver that answers 500 to each delivery's first attempt and
// 200 to its retry). 5f: 5a's burst with a second delivery process in the
// group (horizontal scale, on whatever cores the machine has).
// 5g: 20 subscriptions of 20 accounts on ONE receiver origin (different
// paths), 4 of them hanging: the 16 healthy ones' deliveries/s with the
// hanging ones' events in the burst, as a ratio to the same 16 alone.
import { join } from 'node:path';
import { ensureAccounts } from '../lib/accounts.mjs';
import { call, pool } from '../lib/http.mjs';
import { benchDir } from '../lib/paths.mjs';
import { startNode } from '../lib/proc.mjs';
import { INGEST_TOKEN, startApi, startDelivery } from '../lib/services.mjs';
import { infraCpu } from '../lib/cpu-share.mjs';
import { percentile, sleep, spreadOf } from '../lib/stats.mjs';

export const title = 'Webhook deliveries (one delivery process)';
const SUBS = 50; // per configuration, one per account
const HANGING = 10; // of SUBS in the second configuration: 20%
const CONCURRENCY = 256; // WEBHOOK_CONCURRENCY's default, also the reference client's
const RETRY_SUBS = 20; // 5e: subscriptions on the flaky receiver, one per account
const ORIGIN_SUBS = 20; // 5g: subscriptions on one origin, one per account
const ORIGIN_HANGING = 4; // of ORIGIN_SUBS: 20%
const LOW_RATE = 100; // events/s of the latency phases (p50/p99 at 100 and 1,000 events/s)
const HIGH_RATE = 1000;

export async function run(ctx) {
  const caFile = join(ctx.scratch, 'webhook-ca.pem');
  const receivers = startNode('receivers', [join(benchDir, 'workers', 'receivers.mjs')], { logFile: join(ctx.scratch, 'webhooks-receivers.log') });
  const ports = await receivers.request('start', { caFile });
  const topic = ctx.topic('webhooks');
  const env = { WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true', WEBHOOK_CA_FILE: caFile };
  const api = await startApi(ctx, { name: 'api', topic, env });
  const all = 2 * SUBS + RETRY_SUBS + ORIGIN_SUBS;
  const accounts = (await ensureAccounts(ctx, api.url, all)).slice(0, all);
  const configs = {
    healthy: accounts.slice(0, SUBS).map((a, i) => ({ account: a, url: `https://127.0.0.1:${ports.fast}/healthy/${i}` })),
    mixed: accounts.slice(SUBS, 2 * SUBS).map((a, i) => ({ account: a, url: i < HANGING ? `https://127.0.0.1:${ports.hang}/mixed/${i}` : `https://127.0.0.1:${ports.fast}/mixed/${i}`, hanging: i < HANGING })),
  };
  configs.retry = accounts.slice(2 * SUBS, 2 * SUBS + RETRY_SUBS).map((a, i) => ({ account: a, url: `https://127.0.0.1:${ports.flaky}/retry/${i}` }));
  // 5g: every one on the fast receiver's origin; the hanging ones' paths are never answered there.
  configs.origin = accounts.slice(2 * SUBS + RETRY_SUBS).map((a, i) => ({ account: a, url: `https://127.0.0.1:${ports.fast}/origin/${i < ORIGIN_HANGING ? 'hanging/' : ''}${i}`, hanging: i < ORIGIN_HANGING }));
  configs.originAlone = configs.origin.filter((s) => !s.hanging);
  await pool([...configs.healthy, ...configs.mixed, ...configs.retry, ...configs.origin], 8, async (s) => {
    s.id = (await call(api.url, 'POST', '/api/v1/webhooks', { body: { url: s.url, events: ['*'], description: 'bench' }, headers: { authorization: `Bearer ${s.account.token}` } })).id;
  });
  // MONGO_SLOW_MS turns the driver's command monitor on: the probe counts the store operations (nothing is that slow: no log).
  const delivery = await startDelivery(ctx, { name: 'delivery', topic, env: { ...env, WEBHOOK_CONCURRENCY: String(CONCURRENCY), MONGO_SLOW_MS: '3600000' } });
  const pacer = startNode('pacer', [join(benchDir, 'workers', 'pacer.mjs')], { logFile: join(ctx.scratch, 'webhooks-pacer.log') });

  const ingest = async (ids, count, extra) => {
    for (let sent = 0; sent < count; sent += 500) {
      const n = Math.min(500, count - sent);
      await pacer.request('burst', { url: api.url, token: INGEST_TOKEN, accounts: Array.from({ length: n }, (_, i) => ids[(sent + i) % ids.length]), extra });
    }
  };
  const collect = async (prefix, expected, timeoutMs) => {
    const got = [];
    const deadline = Date.now() + timeoutMs;
    while (got.length < expected && Date.now() < deadline) {
      await sleep(250);
      got.push(...(await receivers.request('take')).received.filter(([path]) => path.startsWith(prefix)));
    }
    return got;
  };

  // Warm-up: the group joins, connections and TLS sessions are made, and the
  // rate it delivers at sizes the bursts (~30 s of work at the warm-up's rate,
  // a small batch that understates it severalfold; at least 200, at most
  // 6,000), so a slow store does not leave a burst's backlog running into the
  // next measurement. A full run's bursts were capped at 2,000 until the sender
  // moved to undici: 2,000 deliveries then took 0.5-1.4 s, too short a window
  // for a steady rate (one GC pause or fetch gap moved a round by +-50 %).
  ctx.log('warming up');
  await ingest(configs.healthy.map((s) => s.account.id), SUBS, { warm: 1 });
  await collect('/healthy/', SUBS, 60_000);
  const w0 = Date.now();
  await ingest(configs.healthy.map((s) => s.account.id), 2 * SUBS, { warm: 2 });
  const warm = await collect('/healthy/', 2 * SUBS, 60_000);
  const capacity = warm.length / ((Date.now() - w0) / 1000);
  const burst = Math.max(200, Math.min(ctx.quick ? 600 : 6000, Math.round(capacity * (ctx.quick ? 8 : 30))));
  ctx.log(`warm-up delivered at ~${capacity.toFixed(0)}/s: bursts of ${burst} events`);

  const healthyShareOf = (subs) => subs.filter((s) => !s.hanging).length / subs.length;
  // Throughput: a burst far larger than what is in flight at once, drained (`prefix`: the paths received).
  const throughput = async (name, prefix = `/${name}/`) => {
    const subs = configs[name];
    const ids = subs.map((s) => s.account.id);
    // Exactly the burst's events whose account has a healthy subscription (event k goes to ids[k % n]).
    const healthyAt = subs.map((s) => !s.hanging);
    const expected = Array.from({ length: burst }, (_, k) => healthyAt[k % subs.length]).filter(Boolean).length;
    await receivers.request('take');
    await delivery.child.request('stats', { reset: true });
    const infra = infraCpu();
    const got = await ctx.profiled(delivery.child, name, async () => {
      await ingest(ids, burst, {});
      return collect(prefix, expected, 45_000);
    });
    if (got.length < expected) {
      // Which healthy subscriptions came up short, and the spread of arrival times: a missing
      // delivery is a finding, not noise.
      const per = new Map();
      for (const [path] of got) per.set(path, (per.get(path) ?? 0) + 1);
      const short = subs
        .map((s, i) => ({ path: new URL(s.url).pathname, want: healthyAt[i] ? Array.from({ length: burst }, (_, k) => k % subs.length === i).filter(Boolean).length : 0 }))
        .filter((x) => x.want > 0 && (per.get(x.path) ?? 0) < x.want)
        .map((x) => `${x.path} ${per.get(x.path) ?? 0}/${x.want}`);
      ctx.log(`${name}: ${expected - got.length} healthy deliveries missing after 45 s: ${short.join(', ')}`);
    }
    const times = got.map((r) => r[3]);
    // Deliveries/s between the first and the last one received (none or one: 0).
    const span = times.length > 1 ? (Math.max(...times) - Math.min(...times)) / 1000 : 0;
    const stats = await delivery.child.request('stats', { reset: true });
    // Store operations per delivery received (the hanging subscriptions' attempts and retries included in the operations).
    const m = { deliveriesPerSec: span > 0 ? got.length / span : 0, delivered: got.length, expected, storeOps: stats.storeOps, storeOpsPerDelivery: got.length > 0 ? stats.storeOps / got.length : null, cpu: stats.cpu, eldP99: stats.eld.p99, infraCpu: infra.read() };
    ctx.log(`${name}: ${m.deliveriesPerSec.toFixed(0)} healthy deliveries/s (${got.length}/${m.expected}); ${stats.storeOps} store operations (${m.storeOpsPerDelivery?.toFixed(2)} per delivery); delivery CPU ${(stats.cpu * 100).toFixed(0)}%, FerretDB ${(m.infraCpu.ferretdb * 100).toFixed(0)}%`);
    return m;
  };
  // Latency: events at a steady rate, each from the pacer's send to the receiver (healthy subscriptions only).
  const latency = async (name, rate) => {
    const subs = configs[name];
    const healthyShare = healthyShareOf(subs);
    await receivers.request('take');
    const seconds = ctx.quick ? 4 : 6;
    await pacer.request('start', { url: api.url, token: INGEST_TOKEN, rate, seconds, accounts: subs.map((s) => s.account.id) });
    const paced = await pacer.request('finish', {}, 120_000);
    const timed = await collect(`/${name}/`, Math.round(paced.sent * healthyShare), 20_000 + paced.sent * 5);
    const lat = timed.filter((r) => r[2]).map((r) => r[3] - r[2]);
    const m = { rate, sent: paced.sent, expected: Math.round(paced.sent * healthyShare), delivered: timed.length, p50: percentile(lat, 50), p99: percentile(lat, 99), samples: lat.length };
    ctx.log(`${name} @${rate} events/s: p50 ${m.p50?.toFixed(1)} ms, p99 ${m.p99?.toFixed(1)} ms (${lat.length} of ${m.expected})`);
    return m;
  };
  // Each figure over ctx.runs rounds (3 in a full run), its median reported with the spread of the rounds.
  const rounds = [];
  // One unmeasured burst first: without it the first measured round runs well below the others
  // (the connection pool growing to its working size, code not yet optimised).
  if (ctx.runs > 1) {
    ctx.log('warm-up burst (not measured)');
    await throughput('healthy');
  }
  for (let r = 0; r < ctx.runs; r++) {
    ctx.log(`round ${r + 1} of ${ctx.runs}`);
    const healthy = await throughput('healthy');
    const healthyLatency = { low: await latency('healthy', LOW_RATE), high: await latency('healthy', HIGH_RATE) };
    const mixed = await throughput('mixed');
    const mixedLatency = { low: await latency('mixed', LOW_RATE) };
    // 5g: the same 16 healthy subscriptions on one origin, alone and then with the 4 hanging ones' events in the burst.
    const originAlone = await throughput('originAlone', '/origin/');
    const origin = await throughput('origin', '/origin/');
    const originRatio = originAlone.deliveriesPerSec > 0 ? origin.deliveriesPerSec / originAlone.deliveriesPerSec : null;
    ctx.log(`one origin, ${ORIGIN_HANGING} of ${ORIGIN_SUBS} hanging: ${origin.deliveriesPerSec.toFixed(0)} healthy deliveries/s, ${originAlone.deliveriesPerSec.toFixed(0)} without the hanging ones: ratio ${originRatio?.toFixed(2)}`);
    rounds.push({ healthy, mixed, healthyLatency, mixedLatency, mixedRatio: healthy.deliveriesPerSec > 0 ? mixed.deliveriesPerSec / healthy.deliveriesPerSec : null, originAlone, origin, originRatio });
  }
  const fig = (pick) => spreadOf(rounds.map(pick));

  // The hanging subscriptions' deliveries from 5b wait in the retry store (retries at 5 s, 30 s,
  // 2 min, each attempt 4 s): deleted now, so 5f and 5e measure their own traffic. Left in, their
  // retries fall due during 5f and saturate the store: a hung backlog's cost is 5b's figure,
  // not 5f's.
  await pool(
    [...configs.mixed, ...configs.origin].filter((s) => s.hanging),
    10,
    (s) => call(api.url, 'DELETE', `/api/v1/webhooks/${s.id}`, { headers: { authorization: `Bearer ${s.account.token}` } }),
  );

  // 5f: a second delivery process joins the group; the two share the partitions (fresh events)
  // and 5a's burst is measured again with both, each process's CPU share alongside.
  const deliveryEnv = { ...env, WEBHOOK_CONCURRENCY: String(CONCURRENCY), MONGO_SLOW_MS: '3600000' };
  const second = await startDelivery(ctx, { name: 'delivery-2', topic, env: deliveryEnv });
  await sleep(ctx.quick ? 8000 : 12_000); // the group rebalances onto both
  await throughput('healthy'); // unmeasured: the second process's connections and code warm up
  const twoRounds = [];
  for (let r = 0; r < ctx.runs; r++) {
    await second.child.request('stats', { reset: true });
    const m = await throughput('healthy');
    const other = await second.child.request('stats', { reset: true });
    twoRounds.push({ deliveriesPerSec: m.deliveriesPerSec, cpu: [m.cpu, other.cpu], storeOps: m.storeOps + other.storeOps });
    ctx.log(`two delivery processes: ${m.deliveriesPerSec.toFixed(0)} deliveries/s; CPU ${(m.cpu * 100).toFixed(0)}% + ${(other.cpu * 100).toFixed(0)}%, FerretDB ${(m.infraCpu.ferretdb * 100).toFixed(0)}%`);
  }
  const rateTwo = spreadOf(twoRounds.map((r) => r.deliveriesPerSec));
  await Promise.all([delivery.child.stop(), second.child.stop()]);

  // 5e: every delivery fails once and is retried 100 ms later through the retry store (stored
  // delivery, due bucket, claim, attempt). A delivery process of its own for the schedule (the
  // hanging subscriptions were deleted above: their stored retries are dropped unsent).
  const retrier = await startDelivery(ctx, { name: 'delivery-retry', topic, env: { ...env, WEBHOOK_CONCURRENCY: String(CONCURRENCY), MONGO_SLOW_MS: '3600000', WEBHOOK_RETRY_SCHEDULE: '100ms,100ms,100ms,100ms,100ms' } });
  const retryIds = configs.retry.map((s) => s.account.id);
  await ingest(retryIds, RETRY_SUBS, { warm: 3 });
  await collect('/retry/', RETRY_SUBS, 60_000);
  const retryBurst = ctx.quick ? 500 : 2000;
  await retrier.child.request('stats', { reset: true });
  const r0 = Date.now();
  const retried = await ctx.profiled(retrier.child, 'retry', async () => {
    await ingest(retryIds, retryBurst, {});
    return collect('/retry/', retryBurst, 120_000);
  });
  const retryStats = await retrier.child.request('stats', { reset: true });
  const retrySeconds = retried.length > 0 ? (Math.max(...retried.map((r) => r[3])) - r0) / 1000 : 0;
  const retry = { retriesPerSec: retrySeconds > 0 ? retried.length / retrySeconds : 0, delivered: retried.length, expected: retryBurst, seconds: retrySeconds, storeOps: retryStats.storeOps, storeOpsPerRetry: retried.length > 0 ? retryStats.storeOps / retried.length : null, cpu: retryStats.cpu };
  ctx.log(`retry: ${retry.retriesPerSec.toFixed(0)} retried deliveries/s (${retried.length}/${retryBurst} in ${retrySeconds.toFixed(1)} s from the first event sent); ${retryStats.storeOps} store operations (${retry.storeOpsPerRetry?.toFixed(2)} per retried delivery)`);
  await Promise.all([api.child.stop(), retrier.child.stop(), pacer.stop()]);

  const blast = startNode('https-blast', [join(benchDir, 'workers', 'https-blast.mjs')], { logFile: join(ctx.scratch, 'webhooks-blast.log') });
  const body = JSON.stringify({ id: 'evt_' + '0'.repeat(24), type: 'message.received', created_at: new Date().toISOString(), data: { t: 0, seq: 1, from: '+14155550123', to: '+14155550199', channel: 'sms', text: 'Running about ten minutes late, see you at the usual place.' }, cursor: 'c1_MTIuMTIzNDU2' });
  const ref = await blast.request('run', { url: `https://127.0.0.1:${ports.fast}/reference`, caFile, concurrency: CONCURRENCY, seconds: ctx.quick ? 3 : 5, body });
  await Promise.all([blast.stop(), receivers.stop()]);
  ctx.log(`bare HTTPS client: ${ref.rps.toFixed(0)} req/s`);

  const rate5a = fig((r) => r.healthy.deliveriesPerSec);
  const rate5b = fig((r) => r.mixed.deliveriesPerSec);
  const ratio5b = fig((r) => r.mixedRatio);
  const rate5gAlone = fig((r) => r.originAlone.deliveriesPerSec);
  const rate5g = fig((r) => r.origin.deliveriesPerSec);
  const ratio5g = fig((r) => r.originRatio);
  const ops = fig((r) => r.healthy.storeOpsPerDelivery);
  const opsMixed = fig((r) => r.mixed.storeOpsPerDelivery);
  const lowP50 = fig((r) => r.healthyLatency.low.p50);
  const lowP99 = fig((r) => r.healthyLatency.low.p99);
  const highP50 = fig((r) => r.healthyLatency.high.p50);
  const highP99 = fig((r) => r.healthyLatency.high.p99);
  const mixedP50 = fig((r) => r.mixedLatency.low.p50);
  const mixedP99 = fig((r) => r.mixedLatency.low.p99);
  return {
    rows: [
      { id: 'webhooks.throughput', label: '5a webhook deliveries/s, all receivers healthy', value: rate5a.median, spread: rate5a.spread, unit: 'deliveries/s', reference: { label: `bare HTTPS client, ${CONCURRENCY} in flight`, value: ref.rps, unit: 'req/s' }, ratio: rate5a.median / ref.rps, target: { valueAtLeast: 2000, unit: 'deliveries/s' } },
      { id: 'webhooks.mixed.throughput', label: '5b healthy deliveries/s, 20% of subscriptions hanging', value: rate5b.median, spread: rate5b.spread, unit: 'deliveries/s', reference: { label: '5a (all healthy, same round)', value: rate5a.median, unit: 'deliveries/s' }, ratio: ratio5b.median, target: { ratioAtLeast: 0.9 } },
      { id: 'webhooks.p50', label: `5c delivery latency p50 @${LOW_RATE} events/s, all healthy`, value: lowP50.median, spread: lowP50.spread, unit: 'ms', reference: null, target: { valueAtMost: 20, unit: 'ms' } },
      { id: 'webhooks.p99', label: `5c delivery latency p99 @${LOW_RATE} events/s, all healthy`, value: lowP99.median, spread: lowP99.spread, unit: 'ms', reference: null, target: { valueAtMost: 100, unit: 'ms' } },
      { id: 'webhooks.mixed.p99', label: `5c healthy delivery p99 @${LOW_RATE} events/s, 20% hanging`, value: mixedP99.median, spread: mixedP99.spread, unit: 'ms', reference: { label: 'p50', value: mixedP50.median, unit: 'ms' }, target: { valueAtMost: 150, unit: 'ms' } },
      { id: 'webhooks.high.p50', label: `5c delivery latency p50 @${HIGH_RATE} events/s, all healthy`, value: highP50.median, spread: highP50.spread, unit: 'ms', reference: null },
      { id: 'webhooks.high.p99', label: `5c delivery latency p99 @${HIGH_RATE} events/s, all healthy`, value: highP99.median, spread: highP99.spread, unit: 'ms', reference: null },
      { id: 'webhooks.storeOps', label: '5d store operations per delivery, all healthy (burst)', value: ops.median, spread: ops.spread, unit: 'ops/delivery', reference: { label: '20% hanging', value: opsMixed.median, unit: 'ops/delivery' }, target: { valueAtMost: 1 } },
      { id: 'webhooks.two.throughput', label: '5f webhook deliveries/s, two delivery processes (one group), all healthy', value: rateTwo.median, spread: rateTwo.spread, unit: 'deliveries/s', reference: { label: '5a (one process)', value: rate5a.median, unit: 'deliveries/s' }, ratio: rate5a.median > 0 ? rateTwo.median / rate5a.median : null },
      { id: 'webhooks.origin.throughput', label: `5g healthy deliveries/s, ${ORIGIN_SUBS} subscriptions on one origin, 20% hanging`, value: rate5g.median, spread: rate5g.spread, unit: 'deliveries/s', reference: { label: `the ${ORIGIN_SUBS - ORIGIN_HANGING} healthy ones alone (same round)`, value: rate5gAlone.median, unit: 'deliveries/s' }, ratio: ratio5g.median, target: { ratioAtLeast: 0.9 } },
      { id: 'webhooks.retry.throughput', label: '5e retried deliveries/s through the retry store (500 then 200, retry after 100 ms)', value: retry.retriesPerSec, unit: 'deliveries/s', reference: { label: 'store operations per retried delivery', value: retry.storeOpsPerRetry, unit: 'ops/delivery' } },
    ],
    rounds,
    twoProcesses: twoRounds,
    retry,
    reference: ref,
    notes: { subscriptions: SUBS, hanging: HANGING, origin: { subscriptions: ORIGIN_SUBS, hanging: ORIGIN_HANGING }, burst, rates: [LOW_RATE, HIGH_RATE], concurrency: CONCURRENCY, rounds: ctx.runs },
  };
}
