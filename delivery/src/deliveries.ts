/**
 * The delivery records in MongoDB and the lease protocol around them.
 *
 * A delivery that is pending belongs to whichever process holds an unexpired
 * lease on it; only the holder may send its next attempt. Leases are taken
 * with single atomic updates (findOneAndUpdate), so two processes never hold
 * the same delivery; a crashed holder's lease simply runs out and the
 * delivery is claimed again. No transactions are needed (FerretDB has none).
 */
import { createHash } from 'node:crypto';
import { MongoBulkWriteError } from 'mongodb';
import type { EventType } from '../../shared/src/eventlog/types.js';
import type { AttemptDoc, Collections, DeliveryDoc, WebhookDoc } from '../../shared/src/mongo/index.js';

export type DeliveryCollections = Pick<Collections, 'deliveries' | 'attempts' | 'webhooks'>;

/** Deterministic, so consuming the same event twice finds the existing delivery. */
export function deliveryId(eventId: string, subscriptionId: string): string {
  return 'dlv_' + createHash('sha256').update(`${eventId}:${subscriptionId}`).digest('hex').slice(0, 24);
}

const DUPLICATE_KEY = 11000;
const INSERT_CHUNK = 1000;

/**
 * Inserts new deliveries; returns the ids that were really new (a re-consumed
 * batch finds its deliveries already there and leaves them to their holder).
 */
export async function insertDeliveries(c: DeliveryCollections, docs: DeliveryDoc[]): Promise<Set<string>> {
  const inserted = new Set<string>();
  for (let i = 0; i < docs.length; i += INSERT_CHUNK) {
    const chunk = docs.slice(i, i + INSERT_CHUNK);
    try {
      await c.deliveries.insertMany(chunk, { ordered: false });
      for (const d of chunk) inserted.add(d._id);
    } catch (err) {
      if (!(err instanceof MongoBulkWriteError)) throw err;
      const errors = Array.isArray(err.writeErrors) ? err.writeErrors : [err.writeErrors];
      if (errors.some((e) => e.code !== DUPLICATE_KEY)) throw err;
      const failed = new Set(errors.map((e) => e.index));
      chunk.forEach((d, index) => {
        if (!failed.has(index)) inserted.add(d._id);
      });
    }
  }
  return inserted;
}

/** Claims the oldest due delivery that nobody holds (or whose holder's lease ran out). */
export async function claimDue(c: DeliveryCollections, owner: string, now: Date, leaseMs: number): Promise<DeliveryDoc | null> {
  return c.deliveries.findOneAndUpdate(
    {
      state: 'pending',
      next_attempt_at: { $lte: now },
      $or: [{ lease_until: null }, { lease_until: { $lt: now } }],
    },
    { $set: { lease_owner: owner, lease_until: new Date(now.getTime() + leaseMs), updated_at: now } },
    { sort: { next_attempt_at: 1 }, returnDocument: 'after' },
  );
}

/**
 * Extends our own lease right before sending; null when the lease is no longer
 * ours (it expired and another process took the delivery) or it is finished.
 */
export async function renewLease(c: DeliveryCollections, id: string, owner: string, now: Date, leaseMs: number): Promise<DeliveryDoc | null> {
  return c.deliveries.findOneAndUpdate(
    { _id: id, state: 'pending', lease_owner: owner, lease_until: { $gt: now } },
    { $set: { lease_until: new Date(now.getTime() + leaseMs), updated_at: now } },
    { returnDocument: 'after' },
  );
}

/** Hands deliveries we hold but will not send (shutdown) back for immediate claiming. */
export async function releaseLeases(c: DeliveryCollections, ids: string[], owner: string, now: Date): Promise<void> {
  if (ids.length === 0) return;
  await c.deliveries.updateMany(
    { _id: { $in: ids }, lease_owner: owner, state: 'pending' },
    { $set: { lease_owner: null, lease_until: null, updated_at: now } },
  );
}

export interface AttemptRecord {
  delivery: DeliveryDoc;
  attempt: number;
  status: number | null;
  outcome: AttemptDoc['outcome'];
  error: string | null;
  durationMs: number;
  at: Date;
  /** When to try again; null = this was the last attempt. Ignored on success. */
  nextAttemptAt: Date | null;
}

/**
 * Records a finished attempt: the attempt itself first (so a crash right
 * after sending can at worst repeat a recorded attempt, never lose one), then
 * the delivery's new state (only while we still hold it), then the
 * subscription's last_* fields (only if no later attempt was recorded there).
 */
export async function recordAttempt(c: DeliveryCollections, owner: string, r: AttemptRecord, attemptId: string): Promise<void> {
  const d = r.delivery;
  const succeeded = r.outcome === 'ok';
  const next = succeeded ? null : r.nextAttemptAt;
  await c.attempts.insertOne({
    _id: attemptId,
    delivery_id: d._id,
    subscription_id: d.subscription_id,
    account_id: d.account_id,
    event_id: d.event_id,
    event_type: d.event_type,
    attempt: r.attempt,
    status: r.status,
    outcome: r.outcome,
    error: r.error,
    duration_ms: r.durationMs,
    at: r.at,
    next_attempt_at: next,
  });
  const now = new Date(r.at.getTime() + r.durationMs);
  await c.deliveries.updateOne(
    { _id: d._id, lease_owner: owner },
    {
      $set: {
        state: succeeded ? 'succeeded' : next ? 'pending' : 'failed',
        attempts: r.attempt,
        next_attempt_at: next,
        lease_owner: null,
        lease_until: null,
        last_status: r.status,
        last_outcome: r.outcome,
        updated_at: now,
      },
    },
  );
  // Attempts of one subscription run concurrently: the latest start time wins, whatever order they finish in.
  await c.webhooks.updateOne(
    { _id: d.subscription_id, $or: [{ last_delivery_at: null }, { last_delivery_at: { $lte: r.at } }] },
    { $set: { last_status: r.status, last_delivery_at: r.at, last_error: r.status === null ? r.outcome : null } },
  );
}

/** A delivery whose subscription was deleted is dropped rather than sent. */
export async function dropDelivery(c: DeliveryCollections, id: string, owner: string): Promise<void> {
  await c.deliveries.deleteOne({ _id: id, lease_owner: owner });
}

export function newDelivery(args: {
  eventId: string;
  eventType: EventType;
  accountId: string;
  subscription: WebhookDoc;
  body: string;
  owner: string;
  now: Date;
  leaseMs: number;
}): DeliveryDoc {
  const { now } = args;
  return {
    _id: deliveryId(args.eventId, args.subscription._id),
    account_id: args.accountId,
    subscription_id: args.subscription._id,
    event_id: args.eventId,
    event_type: args.eventType,
    body: args.body,
    state: 'pending',
    attempts: 0,
    next_attempt_at: now,
    lease_owner: args.owner,
    lease_until: new Date(now.getTime() + args.leaseMs),
    last_status: null,
    last_outcome: null,
    created_at: now,
    updated_at: now,
  };
}
