/** Reads of materialized events. Every query is scoped to one account. */
import type { Collection, Filter } from 'mongodb';
import type { Position } from '../../../../shared/src/cursor.js';
import { docToRecord } from '../../../../shared/src/eventlog/envelope.js';
import type { EventType } from '../../../../shared/src/eventlog/types.js';
import type { EventDoc } from '../../../../shared/src/mongo/documents.js';
import type { RangeQuery } from './feed.js';
import type { LiveEvent } from './waiters.js';

const SORT = { partition: 1, offset: 1 } as const;

function typeFilter(types: readonly EventType[] | null): Filter<EventDoc> {
  if (!types || types.length === 0) return {};
  return types.length === 1 ? { type: types[0] } : { type: { $in: [...types] } };
}

/** Events of an account strictly after `since` (or from the oldest), oldest first. */
export async function readAfter(events: Collection<EventDoc>, q: { accountId: string; since: Position | null; types: readonly EventType[] | null; limit: number }): Promise<EventDoc[]> {
  const filter: Filter<EventDoc> = { account_id: q.accountId, ...typeFilter(q.types) };
  if (q.since) {
    filter.partition = q.since.partition;
    filter.offset = { $gt: Number(q.since.offset) };
  }
  return events.find(filter).sort(SORT).limit(q.limit).toArray();
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
