// Scenario 2: visibility lag. A steady 1,000 events/s goes into one API
// process; pollers measure how long after the ingest acknowledgement each
// event is first returned by GET /api/v1/events (the materializer's lag, plus
// at most one poll interval). Reference: Kafka's own end-to-end latency.
import { join } from 'node:path';
import { accountIds } from '../lib/events.mjs';
import { createAccounts } from '../lib/http.mjs';
import { benchDir } from '../lib/paths.mjs';
import { startNode } from '../lib/proc.mjs';
import { kafkaEndToEnd } from '../lib/refs.mjs';
import { INGEST_TOKEN, startApi } from '../lib/services.mjs';
import { infraCpu } from '../lib/infra-cpu.mjs';
import { median, percentile, sleep } from '../lib/stats.mjs';

export const title = 'Visibility lag (ingest ack -> returned by polling)';
const RATE = 1000;
/** Each poll loop waits this long between polls: the figure's resolution, and a sane load. */
const POLL_INTERVAL_MS = 10;
/** How long after the last event the pollers may take to see everything. */
const CATCH_UP_MS = 10_000;

export async function run(ctx) {
  const seconds = ctx.quick ? 5 : 8;
  const api = await startApi(ctx, { name: 'api', topic: ctx.topic('lag') });
  // Two real accounts are polled; eight more ids spread the load over other partitions.
  const polled = await createAccounts(api.url, 2, { prefix: `lag-${ctx.runId}` });
  const ids = [...polled.map((a) => a.id), ...polled.map((a) => a.id), ...accountIds(`lag${ctx.runId}`, 8)];
  const pacer = startNode('pacer', [join(benchDir, 'workers', 'pacer.mjs')], { logFile: join(ctx.scratch, 'lag-pacer.log') });
  const poller = startNode('poller', [join(benchDir, 'workers', 'poller.mjs')], { logFile: join(ctx.scratch, 'lag-poller.log'), env: { POLL_INTERVAL_MS: String(POLL_INTERVAL_MS) } });

  const polledIds = new Set(polled.map((a) => a.id));
  const once = async (secs, label) => {
    await poller.request('start', { url: api.url, accounts: polled });
    await api.child.request('stats', { reset: true });
    const infra = infraCpu();
    await ctx.profiled(api.child, label, async () => {
      await pacer.request('start', { url: api.url, token: INGEST_TOKEN, rate: RATE, seconds: secs, accounts: ids });
      return pacer.request('finish', {}, (secs + 60) * 1000);
    }).then((r) => (once.last = r));
    // Keep polling until every polled event was seen (at most 20 s more): a slow
    // store shows as a long lag rather than as missing samples.
    const want = once.last.acks.filter((x) => polledIds.has(x[3])).length;
    for (let waited = 0; waited < CATCH_UP_MS; waited += 500) {
      await sleep(500);
      if ((await poller.request('count')).seen >= want) break;
    }
    const { seen } = await poller.request('stop');
    const server = await api.child.request('stats', { reset: true });
    const seenAt = new Map(seen);
    const lags = [];
    let missing = 0;
    const stoppedAt = performance.timeOrigin + performance.now();
    for (const [id, , ackAt, account] of once.last.acks) {
      if (!polledIds.has(account)) continue;
      const t = seenAt.get(id);
      if (t === undefined) missing++;
      // Never seen within the window: its lag is at least the time until the pollers stopped.
      lags.push(Math.max(0, (t ?? stoppedAt) - ackAt));
    }
    return { p50: percentile(lags, 50), p99: percentile(lags, 99), censored: missing > 0, samples: lags.length, missing, errors: once.last.errors, sent: once.last.sent, cpu: server.cpu, eldP99: server.eld.p99, infraCpu: infra.read() };
  };

  ctx.log('warming up');
  await once(2, 'warmup');
  const runs = [];
  for (let r = 0; r < ctx.runs; r++) {
    const m = await once(seconds, `run-${r}`);
    runs.push(m);
    if (m.missing > m.samples / 2) {
      ctx.log(`most events were not visible within ${CATCH_UP_MS / 1000} s of the window: one run is the figure (a lower bound)`);
      break;
    }
    ctx.log(`run ${r + 1}: lag p50 ${m.p50?.toFixed(1)} ms, p99 ${m.p99?.toFixed(1)} ms over ${m.samples} polled events (${m.missing} never seen, ${m.errors} ingest errors, ${m.sent} sent); API CPU ${(m.cpu * 100).toFixed(0)}%, FerretDB ${(m.infraCpu.ferretdb * 100).toFixed(0)}%, loop delay p99 ${m.eldP99} ms`);
  }
  await Promise.all([api.child.stop(), pacer.stop(), poller.stop()]);
  const e2e = await kafkaEndToEnd(ctx);
  const p50 = median(runs.map((m) => m.p50));
  const p99 = median(runs.map((m) => m.p99));
  const censored = runs.some((m) => m.censored);
  return {
    rows: [
      { id: 'lag.p50', label: `2 visibility lag p50 @ ${RATE} ev/s`, value: p50, unit: censored ? 'ms (at least: some events not visible within the window)' : 'ms', reference: { label: 'Kafka EndToEndLatency p50', value: e2e.p50, unit: 'ms' }, ratio: p50 / e2e.p50 },
      { id: 'lag.p99', label: `2 visibility lag p99 @ ${RATE} ev/s`, value: p99, unit: censored ? 'ms (at least)' : 'ms', reference: { label: 'Kafka EndToEndLatency p99', value: e2e.p99, unit: 'ms' }, ratio: p99 / e2e.p99, target: { valueAtMost: 100, unit: 'ms' } },
    ],
    runs,
    notes: { rate: RATE, seconds, pollIntervalMs: POLL_INTERVAL_MS, polledShare: 0.4, catchUpMs: CATCH_UP_MS, ingestErrors: runs.reduce((n, m) => n + m.errors, 0) },
  };
}
