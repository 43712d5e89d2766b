// Visibility lag (scenario 2's measurement, also run by scenario 6 with a million
// events in the store): a pacer sends single events at `rate`/s through the API;
// pollers loop GET /api/v1/events with their cursor on the `polled` accounts; the
// lag of an event is from its ingest acknowledgement to the poll that first
// returns it (so it includes up to one poll interval).
import { join } from 'node:path';
import { benchDir } from './paths.mjs';
import { startNode } from './proc.mjs';
import { INGEST_TOKEN } from './services.mjs';
import { infraCpu } from './cpu-share.mjs';
import { percentile, sleep } from './stats.mjs';

/** Each poll loop waits this long between polls: the figure's resolution, and a sane load. */
export const POLL_INTERVAL_MS = 10;
/** How long after the last event the pollers may take to see everything. */
export const CATCH_UP_MS = 10_000;

/**
 * `polled`: accounts ({ id, key }) whose events are polled; `ids`: the account
 * ids the events go to (the polled ones and others that spread the load).
 */
export function visibilityProbe(ctx, { api, polled, ids, rate, name }) {
  const pacer = startNode(`${name}-pacer`, [join(benchDir, 'workers', 'pacer.mjs')], { logFile: join(ctx.scratch, `${name}-pacer.log`) });
  const poller = startNode(`${name}-poller`, [join(benchDir, 'workers', 'poller.mjs')], { logFile: join(ctx.scratch, `${name}-poller.log`), env: { POLL_INTERVAL_MS: String(POLL_INTERVAL_MS) } });
  const polledIds = new Set(polled.map((a) => a.id));
  /** One window of `secs` seconds at `rate` events/s: the lags of the polled accounts' events. */
  const once = async (secs, label) => {
    await poller.request('start', { url: api.url, accounts: polled });
    await api.child.request('stats', { reset: true });
    const infra = infraCpu();
    const paced = await ctx.profiled(api.child, label, async () => {
      await pacer.request('start', { url: api.url, token: INGEST_TOKEN, rate, seconds: secs, accounts: ids });
      return pacer.request('finish', {}, (secs + 60) * 1000);
    });
    // Keep polling until every polled event was seen (at most CATCH_UP_MS more): a slow
    // store shows as a long lag rather than as missing samples.
    const want = paced.acks.filter((x) => polledIds.has(x[3])).length;
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
    for (const [id, , ackAt, account] of paced.acks) {
      if (!polledIds.has(account)) continue;
      const t = seenAt.get(id);
      if (t === undefined) missing++;
      // Never seen within the window: its lag is at least the time until the pollers stopped.
      lags.push(Math.max(0, (t ?? stoppedAt) - ackAt));
    }
    return { p50: percentile(lags, 50), p99: percentile(lags, 99), censored: missing > 0, samples: lags.length, missing, errors: paced.errors, sent: paced.sent, cpu: server.cpu, eldP99: server.eld.p99, infraCpu: infra.read() };
  };
  return { once, stop: () => Promise.all([pacer.stop(), poller.stop()]) };
}
