/** Reads of materialized events. Every query is scoped to one account. */
import type { Collection, Filter } from 'mongodb';
import type { Position } from '../../../shared/src/cursor.js';
import { docToRecord } from '../../../shared/src/eventlog/envelope.js';
import type { EventType } from '../../../shared/src/eventlog/types.js';
import type { EventDoc } from '../../../shared/src/mongo/documents.js';
import type { LiveEvent, RangeQuery, StoredEvent } from './types.js';

const SORT = { partition: 1, offset: 1 } as const;

function typeFilter(types: readonly EventType[] | null): Filter<EventDoc> {
  if (!types || types.length === 0) return {};
  return types.length === 1 ? { type: types[0] } : { type: { $in: [...types] } };
}

/**
 * Events of an account in its partition strictly after `since` (or from the
 * oldest) and at most `through` (the partition's watermark), oldest first.
 * Bounding by the watermark means every event returned had all its
 * predecessors stored before this read began, so an index scan racing the
 * materializer can never return an event while missing an earlier one.
 */
export async function readAfter(
  events: Collection<EventDoc>,
  q: { accountId: string; partition: number; since: Position | null; through: bigint; types: readonly EventType[] | null; limit: number },
): Promise<EventDoc[]> {
  if (q.since && q.since.offset >= q.through) return [];
  const offset = { $lte: Number(q.through), ...(q.since ? { $gt: Number(q.since.offset) } : {}) };
  return events.find({ account_id: q.accountId, partition: q.partition, offset, ...typeFilter(q.types) }).sort(SORT).limit(q.limit).toArray();
}

/** Events of an account in (after, before) of one partition, oldest first: a Feed's catch-up read. */
export async function readRange(events: Collection<EventDoc>, q: RangeQuery): Promise<LiveEvent[]> {
  const docs = await events
    .find({ account_id: q.accountId, partition: q.partition, offset: { $gt: Number(q.after), $lt: Number(q.before) }, ...typeFilter(q.types) })
    .sort(SORT)
    .limit(q.limit)
    .toArray();
  return docs.map((doc) => ({ position: { partition: doc.partition, offset: BigInt(doc.offset) }, record: docToRecord(doc) }));
}

/** Events of every account in [from, before) of one partition, oldest first: the fan-out filling a gap the broker no longer has. */
export async function readPartition(events: Collection<EventDoc>, partition: number, from: bigint, before: bigint, limit: number): Promise<StoredEvent[]> {
  const docs = await events
    .find({ partition, offset: { $gte: Number(from), $lt: Number(before) } })
    .sort(SORT)
    .limit(limit)
    .toArray();
  return docs.map((doc) => ({ accountId: doc.account_id, position: { partition: doc.partition, offset: BigInt(doc.offset) }, record: docToRecord(doc) }));
}
