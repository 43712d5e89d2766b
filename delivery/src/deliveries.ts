/**
 * The delivery records in MongoDB and the lease protocol around them.
 *
 * A pending delivery belongs to whichever process holds an unexpired lease
 * on it; only the holder may send its next attempt. A lease is won by
 * inserting the claim document `${delivery id}:${claim_seq + 1}`: unique
 * inserts are atomic on MongoDB and on FerretDB alike, whereas FerretDB 1.x
 * applies conditional updates and findOneAndUpdate as read-then-write, so two
 * processes could both "win" those. A process that read a stale copy of the
 * delivery tries a claim number someone already took and loses; a crashed
 * holder's lease runs out and the next claim number is free to take.
 * Claim documents are kept (a deleted one could be won a second time by a
 * stale reader) and only swept once far older than any read can be.
 */
import { isOperationalEventType, type EventType } from '#shared/eventlog/types.js';
import type { Logger } from '#shared/log.js';
import type { AttemptDoc, Collections, DeliveryDoc, WebhookDoc } from '#shared/mongo/index.js';
import { deliveryId, insertDeliveries, scheduleDue, type DueWriteOrder } from '#shared/mongo/delivery-queue.js';

export type DeliveryCollections = Pick<Collections, 'deliveries' | 'attempts' | 'webhooks' | 'webhookStatus' | 'claims' | 'retryDue'> & {
  /** This process's write order into the due store: one for the whole process (delivery-queue.ts). */
  dueWrites: DueWriteOrder;
  /**
   * Whether a conditional update is atomic on this server
   * (conditionalWritesAreAtomic: MongoDB yes, FerretDB no). Absent or
   * failing: no, and a check-then-write is an `_id` read then an `_id` write.
   */
  conditionalWritesAreAtomic?: () => Promise<boolean>;
};

/** Whether to send a check-then-write as one conditional update (see DeliveryCollections). */
export async function atomicWrites(c: Pick<DeliveryCollections, 'conditionalWritesAreAtomic'>): Promise<boolean> {
  return (await c.conditionalWritesAreAtomic?.().catch(() => false)) ?? false;
}

const DUPLICATE_KEY = 11000;

/**
 * Pending deliveries due now (held or not) and all pending ones: the queue
 * gauges. Two counts over the deliveries (a scan on FerretDB), run only by
 * the periodic metrics sampler, never on the delivery or retry path.
 */
export async function countQueue(c: DeliveryCollections, now: Date): Promise<{ due: number; pending: number }> {
  const [due, pending] = await Promise.all([
    c.deliveries.countDocuments({ state: 'pending', next_attempt_at: { $lte: now } }),
    c.deliveries.countDocuments({ state: 'pending' }),
  ]);
  return { due, pending };
}

/**
 * Takes the next claim on a delivery as seen in `seen` (also used by a holder
 * to extend its own lease: it takes the claim after its own). Returns the
 * delivery as now held, or null when another process got that claim first.
 *
 * A process that dies (or whose update fails) between inserting claim n and
 * recording it on the delivery leaves the delivery at n - 1 with claim n
 * taken; every later claimer would lose on n forever and the delivery would
 * never be sent again (found by the delivery fault test: SIGKILL during
 * delivery left some stuck for good). So a taken claim number is looked at:
 * when the delivery still shows an older number and that claim's lease has
 * run out, the claim is an orphan and the next number is tried.
 */
export async function claim(c: DeliveryCollections, seen: DeliveryDoc, owner: string, now: Date, leaseMs: number): Promise<DeliveryDoc | null> {
  for (let seq = seen.claim_seq + 1, tries = 0; tries < MAX_ORPHANED_CLAIMS; seq++, tries++) {
    if (await insertClaim(c, seen._id, seq, owner, now)) {
      const lease = { claim_seq: seq, lease_owner: owner, lease_until: new Date(now.getTime() + leaseMs), updated_at: now };
      await c.deliveries.updateOne({ _id: seen._id }, { $set: lease });
      return { ...seen, ...lease };
    }
    if (!(await isOrphanedClaim(c, seen._id, seq, now, leaseMs))) return null;
  }
  return null;
}

const MAX_ORPHANED_CLAIMS = 5;

/**
 * A holder's renewal of its own lease (a queued delivery re-claimed before
 * its attempt, the lease keeper's extensions): a lease check is bucketed at
 * the new lease's end first, as the scheduler does before its claims. The
 * scheduler does not hand out what its process holds, so without this a
 * holder that dies after renewing would leave no entry that looks at the
 * delivery again.
 */
export async function renewClaim(c: DeliveryCollections, seen: DeliveryDoc, owner: string, now: Date, leaseMs: number): Promise<DeliveryDoc | null> {
  await bucketLeaseChecks(c, [seen], now, leaseMs);
  return claim(c, seen, owner, now, leaseMs);
}

/** The lease checks of leases about to be taken at `now` (one slot per bucket for all): call before the claims. */
export async function bucketLeaseChecks(c: DeliveryCollections, docs: DeliveryDoc[], now: Date, leaseMs: number): Promise<void> {
  await scheduleDue(c, docs.map((d) => ({ d: d._id, s: d.subscription_id, t: now.getTime() + leaseMs })), now.getTime());
}

async function insertClaim(c: DeliveryCollections, deliveryId: string, seq: number, owner: string, now: Date): Promise<boolean> {
  try {
    await c.claims.insertOne({ _id: `${deliveryId}:${seq}`, delivery_id: deliveryId, owner, at: now });
    return true;
  } catch (err) {
    if ((err as { code?: number }).code === DUPLICATE_KEY) return false;
    throw err;
  }
}

/** Claim `seq` was taken but never recorded on the (still pending) delivery, and its lease is over. */
async function isOrphanedClaim(c: DeliveryCollections, deliveryId: string, seq: number, now: Date, leaseMs: number): Promise<boolean> {
  // Usually the claim was just won by another process: one read settles that.
  const taken = await c.claims.findOne({ _id: `${deliveryId}:${seq}` });
  if (!taken || taken.at.getTime() + leaseMs > now.getTime()) return false;
  const current = await c.deliveries.findOne({ _id: deliveryId }, { projection: { claim_seq: 1, state: 1 } });
  // At this claim or past it, we read a stale copy and lost fairly; finished, nothing to take.
  return current !== null && current.state === 'pending' && current.claim_seq < seq;
}

/**
 * Hands deliveries we hold but will not send (shutdown, a full queue) back
 * for immediate claiming: the lease is cleared and the delivery goes into the
 * current due bucket. A delivery claimed by another process meanwhile is left
 * alone (it shows another owner). Where conditional updates are atomic
 * (MongoDB), each is one findOneAndUpdate on `{_id, lease_owner, state}`,
 * served by the `_id` index. On FerretDB each is read and written by `_id`:
 * there any other filter reads the whole collection, and a conditional
 * update is a read then a write anyway. There, a process that claims the
 * delivery within that round trip (only possible once our lease ran out)
 * has its lease cleared: the delivery is due at once and claimed again, at
 * worst sent once more, never lost.
 */
export async function releaseLeases(c: DeliveryCollections, ids: string[], owner: string, now: Date): Promise<void> {
  const released: { d: string; s: string; t: number }[] = [];
  const atomic = await atomicWrites(c);
  const unleased = { $set: { lease_owner: null, lease_until: null, updated_at: now } };
  for (const id of ids) {
    if (atomic) {
      const before = await c.deliveries.findOneAndUpdate({ _id: id, lease_owner: owner, state: 'pending' }, unleased, { projection: { subscription_id: 1 } });
      if (before) released.push({ d: id, s: before.subscription_id, t: now.getTime() });
      continue;
    }
    const current = await c.deliveries.findOne({ _id: id }, { projection: { lease_owner: 1, state: 1, subscription_id: 1 } });
    if (!current || current.lease_owner !== owner || current.state !== 'pending') continue;
    await c.deliveries.updateOne({ _id: id }, unleased);
    released.push({ d: id, s: current.subscription_id, t: now.getTime() });
  }
  if (released.length > 0) await scheduleDue(c, released, now.getTime());
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

/** The attempt gave its delivery up for good: it failed and no further attempt is planned. */
export function isGiveUp(attempt: Pick<AttemptRecord, 'outcome' | 'nextAttemptAt'>): boolean {
  return attempt.outcome !== 'ok' && attempt.nextAttemptAt === null;
}

/**
 * Whether the subscription takes events of this type: `["*"]` takes every
 * type; a ping (which names its subscription) is always taken. The type part
 * of the consumer's matching, checked again right before each send: a
 * delivery of a type the subscription no longer takes (PATCH events) is
 * dropped unsent.
 */
export function takesEventType(sub: Pick<WebhookDoc, 'events'>, type: string): boolean {
  if (type === 'webhook.ping') return true;
  // Operational notifications only by name ("*" does not take them); the consumer also keeps them from the subscription they are about.
  if (isOperationalEventType(type)) return sub.events.includes(type);
  return sub.events.includes('*') || sub.events.includes(type);
}

/**
 * True for a delivery from before the subscription's last re-enabling
 * (`enabled_at`), given up unsent as for a disabled subscription: one of an
 * event that occurred before then (as the consumer plans none), or a resend,
 * recovery or replay asked for before then (none is asked for while it is
 * disabled). Checked right before each send, so a delivery still queued or
 * waiting for a retry across a disable and an enable is never sent. An event
 * time that cannot be read does not stop the send.
 */
export function predatesEnabling(sub: Pick<WebhookDoc, 'enabled_at'>, delivery: Pick<DeliveryDoc, 'body' | 'trigger' | 'created_at'>): boolean {
  if (!(sub.enabled_at instanceof Date)) return false;
  const enabledAt = sub.enabled_at.getTime();
  if ((delivery.trigger ?? 'event') !== 'event') return delivery.created_at.getTime() < enabledAt;
  return eventTime(delivery.body) < enabledAt;
}

/** The `created_at` (ms) of the event record a delivery sends; NaN when there is none. */
function eventTime(body: string): number {
  try {
    const record = JSON.parse(body) as { created_at?: unknown };
    return typeof record.created_at === 'string' ? Date.parse(record.created_at) : NaN;
  } catch {
    return NaN;
  }
}

/** A delivery whose subscription was deleted (or no longer takes its event type) is dropped rather than sent. */
export async function dropDelivery(c: DeliveryCollections, held: DeliveryDoc): Promise<void> {
  await c.deliveries.deleteOne({ _id: held._id, claim_seq: held.claim_seq });
}

/** Outcome of a delivery given up unsent because its subscription was disabled. */
const DISABLED_OUTCOME = 'subscription_disabled';

/**
 * A delivery whose subscription is disabled is given up, unsent: it is not
 * kept for a later re-enabling (which, like a new subscription, gets only
 * events from then on). Fenced on our claim.
 */
export async function giveUpDisabled(c: DeliveryCollections, held: DeliveryDoc, now: Date): Promise<boolean> {
  const res = await c.deliveries.updateOne(
    { _id: held._id, claim_seq: held.claim_seq, state: 'pending' },
    { $set: { state: 'failed', next_attempt_at: null, last_outcome: DISABLED_OUTCOME, lease_owner: null, lease_until: null, updated_at: now } },
  );
  return res.modifiedCount === 1;
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
  /** The event's trace (its Kafka record's `traceparent` header), when it carries one. */
  traceparent?: string | undefined;
}): DeliveryDoc {
  const { now } = args;
  return {
    ...(args.traceparent === undefined ? {} : { traceparent: args.traceparent }),
    _id: deliveryId(args.eventId, args.subscription._id),
    account_id: args.accountId,
    subscription_id: args.subscription._id,
    event_id: args.eventId,
    event_type: args.eventType,
    body: args.body,
    state: 'pending',
    attempts: 0,
    next_attempt_at: now,
    claim_seq: 1, // inserting the delivery is its first claim
    lease_owner: args.owner,
    lease_until: new Date(now.getTime() + args.leaseMs),
    last_status: null,
    last_outcome: null,
    created_at: now,
    updated_at: now,
  };
}

/** Deliveries read from the log into the store, unleased and due now, retried until they land; those already there are left alone. */
export async function storeUnleased(c: DeliveryCollections, docs: DeliveryDoc[], log?: Logger): Promise<void> {
  if (docs.length === 0) return;
  const unleased = docs.map((d) => ({ ...d, lease_owner: null, lease_until: null }));
  // Until it lands: the consumer's offsets stay below these deliveries meanwhile, so giving
  // up would only mean reading (and sending) the log again from there after a restart.
  for (let tries = 1; ; tries++) {
    try {
      await insertDeliveries(c, unleased);
      return;
    } catch (err) {
      if (tries === 1 || tries % 30 === 0) log?.warn({ err, deliveries: docs.length, tries }, 'could not hand deliveries to the retry store; trying again');
      await new Promise((r) => setTimeout(r, Math.min(2000, 200 * tries)));
    }
  }
}
