/**
 * Reads of materialized events, never below the retention floor (retention.ts). An account's history is read from its
 * streams (pages.ts) by `_id` equality only; the one other read,
 * readPartition, fills a gap the broker no longer holds for the fan-out (not
 * a request's read: it runs only after the broker dropped data the fan-out
 * had not dispatched) and uses the events collection's index.
 */
import type { Collection } from 'mongodb';
import type { Position } from '#shared/cursor.js';
import { docToRecord } from '#shared/eventlog/envelope.js';
import type { EventType } from '#shared/eventlog/types.js';
import type { EventDoc } from '#shared/mongo/documents.js';
import type { PageCache } from './page-cache.js';
import { readStream, type PagesCollection } from './pages.js';
import { floorCacheOf } from './retention.js';
import type { LiveEvent, RangeQuery, StoredEvent } from './types.js';

const SORT = { partition: 1, offset: 1 } as const;

/**
 * An account's events of `types` (null: all) on a partition with offsets in
 * (after, upTo], oldest first, at most `limit`: read from the account
 * streams (pages.ts) by `_id` only. Several types: each type's stream, merged
 * by offset (at most one per event type).
 */
async function readStreams(pages: PagesCollection, q: { accountId: string; partition: number; after: bigint | null; upTo: bigint; types: readonly EventType[] | null; limit: number }, cache?: PageCache): Promise<EventDoc[]> {
  const types = q.types && q.types.length > 0 ? [...new Set(q.types)] : [null];
  // Never below the retention floor (retention.ts): what lies there has expired and its pages may be gone.
  const floor = BigInt(await floorCacheOf(pages).floor(q.partition));
  const after = floor > 0n && (q.after === null || q.after < floor - 1n) ? floor - 1n : q.after;
  if (after !== null && after >= q.upTo) return [];
  const runs = await Promise.all(types.map((type) => readStream(pages, { accountId: q.accountId, partition: q.partition, type }, after, q.upTo, q.limit, cache)));
  if (runs.length === 1) return runs[0] as EventDoc[];
  return runs
    .flat()
    .sort((a, b) => a.offset - b.offset)
    .slice(0, q.limit);
}

/**
 * Events of an account in its partition strictly after `since` (or from the
 * oldest) and at most `through` (the partition's watermark), oldest first.
 * Bounding by the watermark means every event returned had all its
 * predecessors stored before this read began, so a read racing the
 * materializer can never return an event while missing an earlier one.
 * `cache`: this process's copies of full pages and directories (page-cache.ts).
 */
export async function readAfter(
  pages: PagesCollection,
  q: { accountId: string; partition: number; since: Position | null; through: bigint; types: readonly EventType[] | null; limit: number },
  cache?: PageCache,
): Promise<EventDoc[]> {
  if (q.since && q.since.offset >= q.through) return [];
  return readStreams(pages, { accountId: q.accountId, partition: q.partition, after: q.since?.offset ?? null, upTo: q.through, types: q.types, limit: q.limit }, cache);
}

/** Events of an account in (after, before) of one partition, oldest first: a Feed's catch-up read. */
export async function readRange(pages: PagesCollection, q: RangeQuery, cache?: PageCache): Promise<LiveEvent[]> {
  if (q.before - q.after <= 1n) return [];
  const docs = await readStreams(pages, { accountId: q.accountId, partition: q.partition, after: q.after, upTo: q.before - 1n, types: q.types, limit: q.limit }, cache);
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
