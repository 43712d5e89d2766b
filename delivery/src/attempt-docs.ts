/**
 * The documents an attempt's record writes: the attempt itself, and the
 * delivery's state after it (fenced on the claim it was sent under).
 */
import type { UpdateFilter } from 'mongodb';
import type { AttemptDoc, DeliveryDoc } from '#shared/mongo/index.js';
import { atomicWrites, type AttemptRecord, type DeliveryCollections } from './deliveries.js';

/** The stored document of a fresh delivery after a failed attempt: due for its retry, or failed for good. */
export function storedAfter(r: AttemptRecord): DeliveryDoc {
  return { ...r.delivery, ...stateAfter(r) };
}

/** A delivery's fields after an attempt: succeeded, pending its retry (unleased), or failed for good. */
function stateAfter(r: AttemptRecord): Pick<DeliveryDoc, 'state' | 'attempts' | 'next_attempt_at' | 'lease_owner' | 'lease_until' | 'last_status' | 'last_outcome' | 'updated_at'> {
  const next = nextAttemptOf(r);
  return {
    state: r.outcome === 'ok' ? 'succeeded' : next ? 'pending' : 'failed',
    attempts: r.attempt,
    next_attempt_at: next,
    lease_owner: null,
    lease_until: null,
    last_status: r.status,
    last_outcome: r.outcome,
    updated_at: new Date(r.at.getTime() + r.durationMs),
  };
}

/**
 * Writes the delivery's new state if we still hold the claim we sent under:
 * our claim number, or a later one of our own process (the lease keeper's
 * extension may have landed on the delivery a moment before our copy learnt
 * its number; this process never claims a delivery it still holds, so a
 * later claim of ours is that extension). Where conditional updates are
 * atomic (MongoDB), that is one update filtered on `{_id, claim_seq}` (and
 * the owner), served by the `_id` index. On FerretDB the claim is checked by
 * a read, then the write is by `_id` alone: `_id` equality is the only
 * filter FerretDB answers from an index (the combined filter read and
 * decoded the whole deliveries collection for every attempt, the delivery
 * benchmark's bottleneck), and its conditional update is a read then a write
 * anyway. The price there is a gap of one round trip in which a holder whose
 * lease already ran out could still write; the worst it can do is what an
 * unfenced write does: put a delivery that another holder just finished
 * back to pending (sent once more) or label it with its own outcome.
 * Nothing is lost either way.
 */
export async function recordStateOf(c: DeliveryCollections, r: AttemptRecord): Promise<void> {
  // r.delivery is the dispatcher's held copy: its claim_seq is the latest extension of our lease.
  const [fence, update] = deliveryUpdate(r);
  const owner = r.delivery.lease_owner;
  if (await atomicWrites(c)) {
    const ours = owner === null ? fence : { _id: fence._id, $or: [{ claim_seq: fence.claim_seq }, { lease_owner: owner, claim_seq: { $gt: fence.claim_seq } }] };
    await c.deliveries.updateOne(ours, update);
    return;
  }
  const current = await c.deliveries.findOne({ _id: fence._id }, { projection: { claim_seq: 1, lease_owner: 1 } });
  if (!current) return; // gone (its subscription was deleted)
  const ours = current.claim_seq === fence.claim_seq || (owner !== null && current.lease_owner === owner && current.claim_seq > fence.claim_seq);
  if (!ours) return; // claimed by another since: theirs to record
  await c.deliveries.updateOne({ _id: fence._id }, update);
}

export function nextAttemptOf(r: AttemptRecord): Date | null {
  return r.outcome === 'ok' ? null : r.nextAttemptAt;
}

export function attemptDoc(r: AttemptRecord, attemptId: string): AttemptDoc {
  const d = r.delivery;
  const doc: AttemptDoc = {
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
    next_attempt_at: nextAttemptOf(r),
  };
  // Only the API's operations set a trigger; the delivery process's own deliveries read as `event`.
  if (d.trigger !== undefined && d.trigger !== 'event') doc.trigger = d.trigger;
  return doc;
}

/** The delivery's new state, only while we still hold it (its claim_seq unchanged): [filter, update]. */
export function deliveryUpdate(r: AttemptRecord): [{ _id: string; claim_seq: number }, UpdateFilter<DeliveryDoc>] {
  return [{ _id: r.delivery._id, claim_seq: r.delivery.claim_seq }, { $set: stateAfter(r) }];
}
