/**
 * The one way a delivery becomes stored, pending work: the delivery process
 * hands over what it could not finish from memory, and the API's operations
 * (resend, recover, replay) queue deliveries here too. How due work is found
 * again (the retry store's layout) is this module's business: callers only
 * insert complete DeliveryDoc records through insertDeliveries.
 */
import { createHash } from 'node:crypto';
import { MongoBulkWriteError, type Collection } from 'mongodb';
import type { DeliveryDoc } from './documents.js';

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
export async function insertDeliveries(c: { deliveries: Collection<DeliveryDoc> }, docs: DeliveryDoc[]): Promise<Set<string>> {
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

