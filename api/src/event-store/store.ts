/**
 * Reads of materialized events, never below the retention floor (retention.ts). An event is
 * read from its account's stream (pages.ts) by `_id` equality only; the
 * events collection holds where each event is (EventIdDoc), not the event,
 * and is read for two things: one event by id (readEventAt after the id's
 * lookup, features/events/service.ts) and readPartition, which fills a gap
 * the broker no longer holds for the fan-out (not a request's read: it runs
 * only after the broker dropped data the fan-out had not dispatched) and
 * uses the events collection's index. A document written before the streams
 * held the only copy holds the whole event and is answered as it is.
 */
import type { Collection } from 'mongodb';
import type { Position } from '#shared/cursor.js';
import { docToRecord } from '#shared/eventlog/envelope.js';
import type { EventType } from '#shared/eventlog/types.js';
import { isWholeEventDoc, type EventDoc, type EventIdDoc, type StoredEventDoc } from '#shared/mongo/documents.js';
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

/**
 * The event at `offset` of an account's partition, from its account stream
 * (pages.ts): null when the stream does not hold it (expired, below the
 * retention floor). Only for an offset at or below the partition's
 * watermark: the stream may not hold an event above it yet.
 */
export async function readEventAt(pages: PagesCollection, q: { accountId: string; partition: number; offset: number }, cache?: PageCache): Promise<EventDoc | null> {
  const [doc] = await readStreams(pages, { accountId: q.accountId, partition: q.partition, after: BigInt(q.offset) - 1n, upTo: BigInt(q.offset), types: null, limit: 1 }, cache);
  return doc && doc.offset === q.offset ? doc : null;
}

/** Account streams read at once by readPartition. */
const STREAMS_AT_ONCE = 8;

/**
 * Events of every account in [from, before) of one partition, oldest first:
 * the fan-out filling a gap the broker no longer has, only below the
 * partition's watermark (fanout.ts waits for it). The range's documents of
 * the events collection (by the `position` index) say which accounts had
 * events there; each account's events of the range are then read from its
 * stream, one bounded read per account (STREAMS_AT_ONCE at a time). A whole
 * event document (written before) is answered as it is; an event its stream
 * no longer holds (expired) is left out.
 */
export async function readPartition(events: Collection<StoredEventDoc>, pages: PagesCollection, partition: number, from: bigint, before: bigint, limit: number, cache?: PageCache): Promise<StoredEvent[]> {
  const docs = await events
    .find({ partition, offset: { $gte: Number(from), $lt: Number(before) } })
    .sort(SORT)
    .limit(limit)
    .toArray();
  const byAccount = new Map<string, EventIdDoc[]>();
  for (const doc of docs) {
    if (isWholeEventDoc(doc)) continue;
    const mine = byAccount.get(doc.account_id);
    if (mine) mine.push(doc);
    else byAccount.set(doc.account_id, [doc]);
  }
  const bodies = new Map<number, EventDoc>();
  const accounts = [...byAccount];
  for (let at = 0; at < accounts.length; at += STREAMS_AT_ONCE) {
    const runs = await Promise.all(
      accounts.slice(at, at + STREAMS_AT_ONCE).map(([accountId, mine]) =>
        readStreams(pages, { accountId, partition, after: BigInt((mine[0] as EventIdDoc).offset) - 1n, upTo: BigInt((mine.at(-1) as EventIdDoc).offset), types: null, limit: mine.length }, cache),
      ),
    );
    for (const run of runs) for (const doc of run) bodies.set(doc.offset, doc);
  }
  const out: StoredEvent[] = [];
  for (const doc of docs) {
    const body = isWholeEventDoc(doc) ? doc : bodies.get(doc.offset);
    if (body && body._id === doc._id) out.push({ accountId: doc.account_id, position: { partition: doc.partition, offset: BigInt(doc.offset) }, record: docToRecord(body) });
  }
  return out;
}
