/**
 * Read models for the dashboard, computed from what the delivery process
 * stores (delivery/src/recorder.ts writes one `delivery_attempts` document per
 * attempt, `deliveries` holds each delivery's state): a subscription's
 * attempts over a window in buckets with latency percentiles, and one event's
 * deliveries with their attempts. Both only read, both are bounded (schemas.ts
 * holds the bounds; docs/decisions.md says why these).
 */
import { notFound } from '#shared/errors/index.js';
import type { EventRecord } from '#shared/eventlog/types.js';
import type { AttemptDoc, DeliveryDoc, DeliveryTrigger } from '#shared/mongo/index.js';
import type { ApiDeps } from '../../deps.js';
import { findEvent } from '../events/index.js';
import { attemptView, findOwned, type Attempt } from '../webhooks/index.js';
import { EVENT_ID, MAX_EVENT_ATTEMPTS, MAX_EVENT_DELIVERIES, MAX_STATS_ATTEMPTS, STATS_WINDOWS, type StatsWindow, type WebhookStatsSchema } from './schemas.js';
import type { Static } from '../../shapes.js';

type ActivityDeps = Pick<ApiDeps, 'config' | 'mongo' | 'clock' | 'resolveHost' | 'secretBox' | 'events' | 'metrics' | 'log'>;

interface Counts {
  succeeded: number;
  failed: number;
  retrying: number;
}

/** A subscription's stats: the route's response shape (schemas.ts), defined once. */
type WebhookStats = Static<typeof WebhookStatsSchema>;

/**
 * What one attempt counts as: `succeeded` (2xx), `retrying` (failed, another
 * attempt is scheduled) or `failed` (failed and it was the last attempt: the
 * delivery has given up). So succeeded + failed are deliveries that finished
 * in the bucket, retrying the failed tries of deliveries still going.
 */
export function classify(a: Pick<AttemptDoc, 'outcome' | 'next_attempt_at'>): keyof Counts {
  if (a.outcome === 'ok') return 'succeeded';
  return a.next_attempt_at ? 'retrying' : 'failed';
}

/** Nearest-rank percentile of ascending `sorted`; null when empty. */
export function percentile(sorted: number[], p: number): number | null {
  if (sorted.length === 0) return null;
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[Math.min(rank, sorted.length) - 1]!;
}

/**
 * The subscription's attempts in the window, in aligned buckets (the last
 * one holds now), with p50/p99 of their durations. Reads at most
 * MAX_STATS_ATTEMPTS attempts, the most recent: beyond that `truncated` is
 * true and the oldest buckets count only what was read. `bounds`: the
 * tests' way to reach the bound without writing 10,000 attempts.
 */
export async function webhookStats(deps: ActivityDeps, accountId: string, id: string, window: StatsWindow, bounds = { maxAttempts: MAX_STATS_ATTEMPTS }): Promise<WebhookStats> {
  await findOwned(deps, accountId, id);
  const { windowMs, bucketMs } = STATS_WINDOWS[window];
  const end = Math.floor(deps.clock().getTime() / bucketMs) * bucketMs + bucketMs;
  const from = end - windowMs;
  const docs = await deps.mongo.collections.attempts
    .find({ subscription_id: id, at: { $gte: new Date(from), $lt: new Date(end) } }, { projection: { _id: 0, at: 1, outcome: 1, next_attempt_at: 1, duration_ms: 1 } })
    .sort({ at: -1 })
    .limit(bounds.maxAttempts + 1)
    .toArray();
  const truncated = docs.length > bounds.maxAttempts;
  if (truncated) docs.length = bounds.maxAttempts; // newest first: the oldest one goes
  const buckets = Array.from({ length: windowMs / bucketMs }, (_, i) => ({ start: new Date(from + i * bucketMs).toISOString(), succeeded: 0, failed: 0, retrying: 0 }));
  const totals = { succeeded: 0, failed: 0, retrying: 0, attempts: docs.length };
  const durations: number[] = [];
  for (const doc of docs) {
    const bucket = buckets[Math.floor((doc.at.getTime() - from) / bucketMs)];
    if (!bucket) continue; // outside the window: the query excludes it, this is belt and braces
    const kind = classify(doc);
    bucket[kind]++;
    totals[kind]++;
    durations.push(doc.duration_ms);
  }
  durations.sort((a, b) => a - b);
  return {
    webhook_id: id,
    window,
    from: new Date(from).toISOString(),
    to: new Date(end).toISOString(),
    bucket_seconds: bucketMs / 1000,
    totals,
    latency_ms: { p50: percentile(durations, 50), p99: percentile(durations, 99) },
    buckets,
    truncated,
  };
}

/** An attempt as the event detail shows it: the same view as a subscription's attempts list. */
type EventAttempt = Attempt;

interface EventDelivery {
  id: string;
  webhook_id: string;
  /** The subscription's URL now; null when it was deleted meanwhile. */
  url: string | null;
  state: DeliveryDoc['state'];
  attempts_made: number;
  next_attempt_at: string | null;
  last_status: number | null;
  last_outcome: string | null;
  created_at: string;
  updated_at: string;
  trigger: DeliveryTrigger;
  attempts: EventAttempt[];
}

interface EventDeliveries {
  event: EventRecord;
  deliveries: EventDelivery[];
  truncated: boolean;
}

/**
 * One event of the account (as polling shows it) with its deliveries, one
 * per subscription it went to, each with its attempts oldest first. 404 for
 * an id that is malformed, another account's, or not (yet) in the stored
 * log. Bounded: MAX_EVENT_DELIVERIES deliveries and MAX_EVENT_ATTEMPTS
 * attempts in all (`truncated` says when either cut something).
 */
export async function eventDeliveries(deps: ActivityDeps, accountId: string, eventId: string, bounds = { maxDeliveries: MAX_EVENT_DELIVERIES, maxAttempts: MAX_EVENT_ATTEMPTS }): Promise<EventDeliveries> {
  if (!EVENT_ID.test(eventId)) throw notFound('Event');
  const { deliveries, attempts, webhooks } = deps.mongo.collections;
  const event = await findEvent(deps, accountId, eventId);
  if (!event) throw notFound('Event');
  // A delivery sent at once from memory leaves only its attempts (the delivery process writes a
  // `deliveries` document only for work handed to the retry store), so both are read and joined.
  const [stored, tries] = await Promise.all([
      deliveries
        .find({ event_id: eventId, account_id: accountId }, { projection: { body: 0 } })
        .sort({ created_at: 1, _id: 1 })
        .limit(bounds.maxDeliveries + 1)
        .toArray(),
      attempts
        .find({ event_id: eventId, account_id: accountId })
        .sort({ at: 1, _id: 1 })
        .limit(bounds.maxAttempts + 1)
        .toArray(),
  ]);
  let truncated = stored.length > bounds.maxDeliveries || tries.length > bounds.maxAttempts;
  if (tries.length > bounds.maxAttempts) tries.length = bounds.maxAttempts;
  const byDelivery = new Map<string, AttemptDoc[]>();
  for (const t of tries) {
    const list = byDelivery.get(t.delivery_id);
    if (list) list.push(t);
    else byDelivery.set(t.delivery_id, [t]);
  }
  const storedById = new Map(stored.map((d) => [d._id, d]));
  const views = [...new Set([...storedById.keys(), ...byDelivery.keys()])].map((id) => deliveryView(id, storedById.get(id), byDelivery.get(id) ?? []));
  views.sort((a, b) => a.created_at.localeCompare(b.created_at) || a.id.localeCompare(b.id));
  if (views.length > bounds.maxDeliveries) {
    truncated = true;
    views.length = bounds.maxDeliveries;
  }
  const hooks = views.length === 0 ? [] : await webhooks.find({ _id: { $in: [...new Set(views.map((d) => d.webhook_id))] }, account_id: accountId }, { projection: { url: 1 } }).toArray();
  const urls = new Map(hooks.map((h) => [h._id, h.url]));
  return {
    event,
    deliveries: views.map((d) => ({ ...d, url: urls.get(d.webhook_id) ?? null })),
    truncated,
  };
}

/** One delivery as the event detail shows it: from its stored document when it has one, else from its attempts. */
function deliveryView(id: string, stored: DeliveryDoc | undefined, tries: AttemptDoc[]): EventDelivery {
  const last = tries.at(-1);
  const first = tries[0];
  const fromAttempts = (): EventDelivery['state'] => (last?.outcome === 'ok' ? 'succeeded' : last && last.next_attempt_at === null ? 'failed' : 'pending');
  const nextAt = stored ? stored.next_attempt_at : (last?.next_attempt_at ?? null);
  return {
    id,
    webhook_id: stored?.subscription_id ?? first!.subscription_id,
    url: null,
    state: stored?.state ?? fromAttempts(),
    attempts_made: Math.max(stored?.attempts ?? 0, tries.length),
    next_attempt_at: nextAt ? nextAt.toISOString() : null,
    last_status: stored ? (stored.last_status ?? null) : (last?.status ?? null),
    last_outcome: stored ? (stored.last_outcome ?? null) : (last?.outcome ?? null),
    created_at: (stored?.created_at ?? first!.at).toISOString(),
    updated_at: (stored?.updated_at ?? last!.at).toISOString(),
    trigger: stored?.trigger ?? first?.trigger ?? 'event',
    attempts: tries.map(attemptView),
  };
}
