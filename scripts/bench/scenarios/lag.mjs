// Scenario 2: visibility lag. A steady 1,000 events/s goes into one API
// process; pollers measure how long after the ingest acknowledgement each
// event is first returned by GET /api/v1/events (the materializer's lag, plus
// at most one poll interval). Reference: Kafka's own end-to-end latency.
import { accountIds } from '../lib/events.mjs';
import { createAccounts } from '../lib/http.mjs';
import { kafkaEndToEnd } from '../lib/refs.mjs';
import { startApi } from '../lib/services.mjs';
import { median } from '../lib/stats.mjs';
import { CATCH_UP_MS, POLL_INTERVAL_MS, visibilityProbe } from '../lib/visibility.mjs';

export const title = 'Visibility lag (ingest ack -> returned by polling)';
const RATE = 1000;

export async function run(ctx) {
  const seconds = ctx.quick ? 5 : 8;
  const api = await startApi(ctx, { name: 'api', topic: ctx.topic('lag') });
  // Two real accounts are polled; eight more ids spread the load over other partitions.
  const polled = await createAccounts(api.url, 2, { prefix: `lag-${ctx.runId}` });
  const ids = [...polled.map((a) => a.id), ...polled.map((a) => a.id), ...accountIds(`lag${ctx.runId}`, 8)];
  const probe = visibilityProbe(ctx, { api, polled, ids, rate: RATE, name: 'lag' });
  const once = probe.once;

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
  await Promise.all([api.child.stop(), probe.stop()]);
  const e2e = await kafkaEndToEnd(ctx);
  const p50 = median(runs.map((m) => m.p50));
  const p99 = median(runs.map((m) => m.p99));
  const censored = runs.some((m) => m.censored);
  // Scenario 6 measures the same with a million events in the store, and sets it beside this figure.
  ctx.shared.lag = { p50, p99 };
  return {
    rows: [
      { id: 'lag.p50', label: `2 visibility lag p50 @ ${RATE} ev/s`, value: p50, unit: censored ? 'ms (at least: some events not visible within the window)' : 'ms', reference: { label: 'Kafka EndToEndLatency p50', value: e2e.p50, unit: 'ms' }, ratio: p50 / e2e.p50 },
      { id: 'lag.p99', label: `2 visibility lag p99 @ ${RATE} ev/s`, value: p99, unit: censored ? 'ms (at least)' : 'ms', reference: { label: 'Kafka EndToEndLatency p99', value: e2e.p99, unit: 'ms' }, ratio: p99 / e2e.p99, target: { valueAtMost: 100, unit: 'ms' } },
    ],
    runs,
    notes: { rate: RATE, seconds, pollIntervalMs: POLL_INTERVAL_MS, polledShare: 0.4, catchUpMs: CATCH_UP_MS, ingestErrors: runs.reduce((n, m) => n + m.errors, 0) },
  };
}
