/**
 * Delivery operations on one subscription: resend one delivery, recover the
 * failed ones since a time, replay the account's events from a cursor.
 *
 * Each queues new deliveries through insertDeliveries (the one way work
 * becomes stored, pending work): pending, due now, unleased (claim_seq 0),
 * so the delivery process's scheduler claims and sends them like any
 * delivery handed to the retry store, with the full retry schedule. Each new
 * delivery has its own id (X-Service-Delivery, webhook-id) and carries its
 * trigger (`resend`, `recover`, `replay`) into every attempt. Why a new id
 * and not the original's: docs/decisions.md. Where the id comes from decides
 * what two calls at once do:
 * - resend, replay: from the request (its idempotency key, or a random seed)
 *   and what it sends. Two calls without a key (or with two keys) are two
 *   requests and send twice, as asked; a key makes a repeat queue nothing.
 * - recover: from the failed delivery it recovers (recoveryId), whatever the
 *   key: recovering is "send what failed", so two recovers at once queue each
 *   event once (the unique `_id`), and only a failure since gets a new id.
 *
 * All three refuse a disabled subscription (409): the delivery process would
 * give the work up unsent, and queue within the account's limits on pending
 * and per-minute operation deliveries, all of a call or nothing (429:
 * op-admission.ts).
 */
import { createHash } from 'node:crypto';
import { encodeCursor } from '#shared/cursor.js';
import { AppError, notFound, validationFailed } from '#shared/errors/index.js';
import { docToRecord } from '#shared/eventlog/envelope.js';
import { subscriptionTakes, type EventType } from '#shared/eventlog/types.js';
import type { DeliveryDoc, DeliveryTrigger, EventDoc, WebhookDoc } from '#shared/mongo/index.js';
import type { ApiDeps } from '../../deps.js';
import { readAfter } from '../../event-store/store.js';
import { findEvent, resolveSince } from '../events/index.js';
import { DELIVERY_ID, MAX_RECOVER_AGE_MS, MAX_RECOVER_DELIVERIES, MAX_REPLAY_EVENTS, type RecoverInput, type ReplayInput } from './schemas.js';
import { admitAndInsert } from './op-admission.js';
import { findOwned, type WebhookDeps } from './service.js';

/** The due store's write order: operations queue deliveries (insertDeliveries). */
type OperationDeps = WebhookDeps & Pick<ApiDeps, 'dueWrites'>;

/** A delivery id of an operation: `dlv_` + 24 hex, from the request's seed and what it sends. */
export function operationDeliveryId(seed: string, trigger: DeliveryTrigger, of: string): string {
  return 'dlv_' + createHash('sha256').update(`${trigger}:${seed}:${of}`).digest('hex').slice(0, 24);
}

function queued(args: { id: string; sub: WebhookDoc; eventId: string; eventType: EventType; body: string; trigger: DeliveryTrigger; origin?: string; now: Date; due: Date }): DeliveryDoc {
  const doc: DeliveryDoc = {
    _id: args.id,
    account_id: args.sub.account_id,
    subscription_id: args.sub._id,
    event_id: args.eventId,
    event_type: args.eventType,
    body: args.body,
    state: 'pending',
    attempts: 0,
    next_attempt_at: args.due,
    claim_seq: 0, // nobody holds it: the scheduler's first claim is number 1
    lease_owner: null,
    lease_until: null,
    last_status: null,
    last_outcome: null,
    created_at: args.now,
    updated_at: args.now,
    trigger: args.trigger,
  };
  if (args.origin) doc.origin_delivery_id = args.origin;
  // A fifo subscription's: appended to its ordered queue, behind what is there (delivery/src/fifo.ts).
  if (args.sub.ordering === 'fifo') doc.fifo = true;
  return doc;
}

async function enabledSubscription(deps: OperationDeps, accountId: string, id: string): Promise<WebhookDoc> {
  const sub = await findOwned(deps, accountId, id);
  if (sub.enabled === false) throw new AppError('conflict', 'The subscription is disabled: nothing is sent to it; enable it first (PATCH enabled: true)');
  return sub;
}

interface ResendResult {
  delivery_id: string;
  resent_from: string;
  event_id: string;
  trigger: 'resend';
}

/**
 * Sends one delivery of the subscription again, now, whatever its state, as
 * a new delivery (trigger `resend`) with the same body. A delivery that
 * succeeded at its first attempt has no stored document, only attempts: its
 * body is the event's record, read from the store by the event id.
 */
export async function resendDelivery(deps: OperationDeps, accountId: string, subscriptionId: string, deliveryId: string, seed: string): Promise<ResendResult> {
  const sub = await enabledSubscription(deps, accountId, subscriptionId);
  if (!DELIVERY_ID.test(deliveryId)) throw notFound('Delivery');
  const { deliveries, attempts } = deps.mongo.collections;
  const stored = await deliveries.findOne({ _id: deliveryId });
  let eventId: string;
  let eventType: EventType;
  let body: string;
  if (stored) {
    if (stored.account_id !== accountId || stored.subscription_id !== sub._id) throw notFound('Delivery');
    ({ event_id: eventId, event_type: eventType, body } = stored);
  } else {
    const attempt = await attempts.findOne({ delivery_id: deliveryId, account_id: accountId, subscription_id: sub._id });
    if (!attempt) throw notFound('Delivery');
    const event = await findEvent(deps, accountId, attempt.event_id);
    if (!event) throw notFound('Event');
    ({ event_id: eventId, event_type: eventType } = attempt);
    body = JSON.stringify(event);
  }
  const now = deps.clock();
  const id = operationDeliveryId(seed, 'resend', deliveryId);
  await admitAndInsert(deps, accountId, [queued({ id, sub, eventId, eventType, body, trigger: 'resend', origin: deliveryId, now, due: now })]);
  return { delivery_id: id, resent_from: deliveryId, event_id: eventId, trigger: 'resend' };
}

interface RecoverResult {
  queued: number;
  truncated: boolean;
  next_since: string | null;
  next_after_id: string | null;
}

/** Test hook: runs between recover's reads and its insert (two recovers made to read before either inserts). */
export const recoverHooks: { beforeInsert?: (subscriptionId: string) => Promise<void> } = {};

/** The id of the recovery of a failed delivery: from that delivery alone, so every recover of it queues the same id. */
export function recoveryId(failedId: string): string {
  return operationDeliveryId(failedId, 'recover', 'failed');
}

/**
 * Queues again every failed delivery of the subscription created at or
 * after `since` (after `after_id` among those created exactly at `since`):
 * one new delivery (trigger `recover`) per event whose deliveries to it all
 * failed; an event with a delivery to it still pending or succeeded (an
 * earlier recovery, a resend) is left alone. The new delivery's id is
 * derived from the event's newest failed delivery (recoveryId), not from the
 * request: two recovers at once (a double click, two keys or none) see the
 * same newest failure and insert the same id, of which one is stored (the
 * unique `_id`; `queued` counts only what this call stored), so recovering
 * twice does not send twice. Once that recovery has failed too, it is the
 * event's newest failure and a later recover queues a new id. Looks at most
 * MAX_RECOVER_DELIVERIES failed deliveries, in (created_at, _id) order;
 * beyond that `truncated` is true and (`next_since`, `next_after_id`), the
 * last one looked at, is where to continue: deliveries sharing one
 * created_at (a replay's or a recovery's all do) never hold a page in place.
 */
export async function recoverDeliveries(deps: OperationDeps, accountId: string, subscriptionId: string, input: RecoverInput, bound = MAX_RECOVER_DELIVERIES): Promise<RecoverResult> {
  const sub = await enabledSubscription(deps, accountId, subscriptionId);
  const now = deps.clock();
  const since = new Date(input.since);
  if (Number.isNaN(since.getTime())) throw validationFailed([{ path: 'since', message: 'must be an ISO 8601 date-time' }]);
  if (now.getTime() - since.getTime() > MAX_RECOVER_AGE_MS) {
    throw validationFailed([{ path: 'since', message: `must be within the last ${MAX_RECOVER_AGE_MS / 86_400_000} days (delivery records are kept no longer)` }]);
  }
  const { deliveries } = deps.mongo.collections;
  const base = { subscription_id: sub._id, account_id: accountId, state: 'failed' as const };
  const from = input.after_id === undefined ? { created_at: { $gte: since } } : { $or: [{ created_at: { $gt: since } }, { created_at: since, _id: { $gt: input.after_id } }] };
  const failed = await deliveries
    .find({ ...base, ...from })
    .sort({ created_at: 1, _id: 1 })
    .limit(bound + 1)
    .toArray();
  const truncated = failed.length > bound;
  if (truncated) failed.length = bound;
  const last = truncated ? failed.at(-1) : undefined;
  const eventIds = [...new Set(failed.map((d) => d.event_id))];
  // Every delivery of those events to the subscription (within this page or not): live ones, and the newest failure.
  const others =
    eventIds.length === 0
      ? []
      : await deliveries
          .find({ subscription_id: sub._id, event_id: { $in: eventIds }, state: { $in: ['pending', 'succeeded', 'failed'] } }, { projection: { event_id: 1, state: 1, created_at: 1 } })
          .toArray();
  const skip = new Set<string>();
  const newest = new Map<string, Pick<DeliveryDoc, '_id' | 'created_at'>>();
  for (const d of [...failed, ...others]) {
    if (d.state !== 'failed') {
      skip.add(d.event_id);
      continue;
    }
    const seen = newest.get(d.event_id);
    if (!seen || d.created_at > seen.created_at || (d.created_at.getTime() === seen.created_at.getTime() && d._id > seen._id)) newest.set(d.event_id, d);
  }
  const docs: DeliveryDoc[] = [];
  for (const d of failed) {
    if (skip.has(d.event_id)) continue;
    skip.add(d.event_id); // one per event
    const origin = (newest.get(d.event_id) as Pick<DeliveryDoc, '_id'>)._id;
    docs.push(queued({ id: recoveryId(origin), sub, eventId: d.event_id, eventType: d.event_type, body: d.body, trigger: 'recover', origin, now, due: now }));
  }
  await recoverHooks.beforeInsert?.(sub._id);
  const stored = await admitAndInsert(deps, accountId, docs);
  return { queued: stored.size, truncated, next_since: last ? last.created_at.toISOString() : null, next_after_id: last ? last._id : null };
}

interface ReplayResult {
  queued: number;
  cursor: string;
  truncated: boolean;
}

/**
 * A ping goes only to the subscription it was sent to; an operational
 * notification only to a subscription listing it by name, never to the one it
 * is about; a stand-in of a dead-lettered event has no data to send.
 */
function replayable(doc: EventDoc, sub: Pick<WebhookDoc, '_id' | 'events'>): boolean {
  if (doc.data_unavailable) return false;
  if (doc.type === 'webhook.ping') return (doc.data as { subscription_id?: unknown }).subscription_id === sub._id;
  return subscriptionTakes(sub, doc.type, doc.data);
}

/**
 * Delivers to this subscription every event of the account in (since, until]
 * (polling's cursors) whose type it subscribes to, due in log order (due
 * times increase with the log). That is no order of arrival: the scheduler
 * reads a due bucket (a second of due times) whole and tries its entries in
 * shuffled order, and sends concurrently; each body carries its cursor. Reads
 * the account's stream pages by `_id` (never a scan), at most
 * MAX_REPLAY_EVENTS matching events per call: `cursor` is where it stopped
 * (pass it back as `since`), `truncated` says there is more before `until`.
 * Without `until`, up to the end of the stored log now. Events older than the
 * subscription are replayed too: that is what a replay is for.
 */
export async function replayEvents(deps: OperationDeps, accountId: string, subscriptionId: string, input: ReplayInput, seed: string, bound = MAX_REPLAY_EVENTS): Promise<ReplayResult> {
  const sub = await enabledSubscription(deps, accountId, subscriptionId);
  const since = resolveSince(deps as ApiDeps, accountId, input.since, 'since');
  const until = input.until === undefined ? null : resolveSince(deps as ApiDeps, accountId, input.until, 'until');
  if (until && until.offset < since.offset) throw validationFailed([{ path: 'until', message: 'must not be before since' }]);
  const partition = since.partition;
  const stored = await deps.events.watermarks.current(partition);
  const upTo = until && until.offset < stored ? until.offset : stored;
  const types = sub.events.includes('*') ? null : (sub.events as EventType[]);
  const read = await readAfter(deps.mongo.collections.eventPages, { accountId, partition, since, through: upTo, types, limit: bound + 1 });
  const full = read.length > bound;
  if (full) read.length = bound;
  const last = read.at(-1);
  // Where the replay got to: the last event read when cut by the bound, else all of (since, upTo].
  const reached = full && last ? BigInt(last.offset) : upTo > since.offset ? upTo : since.offset;
  const now = deps.clock();
  const events = read.filter((d) => replayable(d, sub));
  const docs = events.map((doc, i) =>
    queued({
      id: operationDeliveryId(seed, 'replay', doc._id),
      sub,
      eventId: doc._id,
      eventType: doc.type,
      body: JSON.stringify(docToRecord(doc)),
      trigger: 'replay',
      now,
      // Due now, in log order (within one due bucket the scheduler shuffles: not an order of sending).
      due: new Date(now.getTime() - (events.length - i)),
    }),
  );
  await admitAndInsert(deps, accountId, docs);
  const cut = full || (until !== null && until.offset > reached);
  return { queued: docs.length, cursor: encodeCursor({ partition, offset: reached }), truncated: cut };
}
