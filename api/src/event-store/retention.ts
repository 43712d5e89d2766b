/**
 * Event retention: history older than EVENT_RETENTION_DAYS is deleted, with
 * work proportional to what expires and every read and delete by `_id`.
 *
 * The materializer writes one journal entry per chunk (pages.ts,
 * `#j:<topic id>:<p>:<first offset>`): where the next chunk starts, the
 * created_at of the chunk's newest event and the ids of the events it stored
 * (journals written before fragments also list the stream pages the chunk
 * opened). A compaction after the chunk lists the pages it started, with
 * their first offsets, under `#js:<topic id>:<p>:<first offset>`. A
 * partition's chunks tile its offsets, so its journal is walked from one
 * entry to the next by `_id`.
 *
 * Each partition has a floor document (`#floor:<p>`): `offset`, the first
 * offset still retained (everything below has expired), and `next`, where the
 * deletion has got to. A sweep of a partition:
 *  1. deletes what lies below the floor published at least `graceMs` ago:
 *     for each journal entry from `next` up to the floor, its events (by id),
 *     the page before each page it or the compaction after it started (a
 *     page is wholly older than the next page's start), a directory once its
 *     last page goes, then the entry and the compaction's list;
 *  2. raises the floor over the entries whose newest event is older than the
 *     retention (nothing is deleted yet: readers that cached the old floor, for
 *     at most FLOOR_CACHE_MS, still find every page they may read).
 * A stream's newest page, and its fragments not compacted yet (fewer than a
 * compaction's worth), are never deleted here, so every stream keeps what
 * holds its first retained event; compaction deletes the fragments it
 * merged. Readers start at the floor (store.ts), so nothing expired is
 * returned, and a cursor below it answers 410 (features/events/service.ts).
 *
 * Two sweepers of one partition (a rebalance) delete the same documents
 * twice, which is harmless; the floor and the cursor only grow ($max).
 */
import type { Collection } from 'mongodb';
import type { StoredEventDoc } from '#shared/mongo/documents.js';
import { dirId, journalContents, journalId, pageId, startedContents, startedId, type JournalDoc, type PagesCollection, type StartedDoc } from './pages.js';
import { isDuplicateKey } from '#shared/mongo/index.js';

/** A partition's retention floor and deletion cursor. */
interface FloorDoc {
  _id: string;
  /** First offset retained: every event below it has expired. */
  offset: number;
  /** When `offset` was last raised. */
  at: Date;
  /** The first journal entry not deleted yet (its first offset). */
  next: number;
  /** The topic id the offsets belong to (a recreated topic starts again). */
  topic_id: string;
}

export function floorId(partition: number): string {
  return `#floor:${partition}`;
}

/** Journal entries walked per partition and phase in one sweep (the rest waits for the next one). */
const MAX_ENTRIES_PER_SWEEP = 2000;
/** Readers keep a partition's floor this long (store.ts); a floor is deleted below only well after this. */
const FLOOR_CACHE_MS = 5000;

interface SweepOptions {
  pages: PagesCollection;
  events: Collection<StoredEventDoc>;
  topicId: string;
  retentionMs: number;
  /** How long a floor is published before what lies below it is deleted (default 30 s; > FLOOR_CACHE_MS). */
  graceMs?: number;
  now?: Date;
}

export interface SweepCounts {
  events: number;
  pages: number;
  entries: number;
  floor: number;
}

/**
 * Makes sure the partition has a floor document starting at `first` (the first
 * journal entry this store has): the writer calls it before its first journal
 * entry of a partition. An existing one of the same topic is left as it is.
 */
export async function ensureFloor(pages: PagesCollection, topicId: string, partition: number, first: number): Promise<void> {
  const floors = pages as unknown as Collection<FloorDoc>;
  const found = await floors.findOne({ _id: floorId(partition) });
  if (found && found.topic_id === topicId) return;
  const doc: FloorDoc = { _id: floorId(partition), offset: 0, at: new Date(0), next: first, topic_id: topicId };
  if (found) {
    // A floor of an earlier topic of this name: the new topic's offsets start again.
    await floors.replaceOne({ _id: doc._id }, doc);
    return;
  }
  try {
    await floors.insertOne(doc);
  } catch (err) {
    if (!isDuplicateKey(err)) throw err; // another writer made it
  }
}

/** One sweep of one partition (see the top of this file). */
export async function sweepPartition(opts: SweepOptions, partition: number): Promise<SweepCounts> {
  const floors = opts.pages as unknown as Collection<FloorDoc>;
  const journal = opts.pages as unknown as Collection<JournalDoc>;
  const compactions = opts.pages as unknown as Collection<StartedDoc>;
  const now = opts.now ?? new Date();
  const counts: SweepCounts = { events: 0, pages: 0, entries: 0, floor: 0 };
  const floor = await floors.findOne({ _id: floorId(partition) });
  if (!floor || floor.topic_id !== opts.topicId) return counts;
  counts.floor = floor.offset;

  // 1. Below the floor published long enough ago: delete.
  let next = floor.next;
  if (now.getTime() - floor.at.getTime() >= (opts.graceMs ?? 30_000)) {
    for (let walked = 0; next < floor.offset && walked < MAX_ENTRIES_PER_SWEEP; walked++) {
      const entry = await journal.findOne({ _id: journalId(opts.topicId, partition, next) });
      if (!entry || entry.next > floor.offset) break;
      const { ids, started } = journalContents(entry);
      if (ids.length > 0) {
        await opts.events.bulkWrite(
          ids.map((id) => ({ deleteOne: { filter: { _id: id } } })),
          { ordered: true },
        );
      }
      // The page before each page a chunk opened (journals written before fragments) or the compaction after it started: wholly below the floor.
      const opened: [string, number, number][] = started.map(([stream, n]) => [stream, n, entry.per_dir]);
      const compaction = await compactions.findOne({ _id: startedId(opts.topicId, partition, entry.first) });
      if (compaction) {
        // A page whose first offset is above the floor (a chunk written again with other bounds) leaves its predecessor for later: never deleted early.
        for (const [stream, n, start] of startedContents(compaction)) if (start <= floor.offset) opened.push([stream, n, compaction.per_dir]);
      }
      const gone: string[] = [];
      for (const [stream, n, perDir] of opened) {
        if (n < 1) continue;
        gone.push(pageId(stream, n - 1));
        if ((n - 1) % perDir === perDir - 1) gone.push(dirId(stream, Math.floor((n - 1) / perDir)));
      }
      if (compaction) gone.push(compaction._id);
      gone.push(entry._id);
      await opts.pages.bulkWrite(
        gone.map((id) => ({ deleteOne: { filter: { _id: id } } })),
        { ordered: true },
      );
      counts.events += ids.length;
      counts.pages += gone.length - (compaction ? 2 : 1);
      counts.entries += 1;
      next = entry.next;
      await floors.updateOne({ _id: floor._id }, { $max: { next } });
    }
  }

  // 2. Raise the floor over the entries that expired (deleted at a later sweep).
  const cutoff = now.getTime() - opts.retentionMs;
  let raised = Math.max(floor.offset, next);
  for (let walked = 0; walked < MAX_ENTRIES_PER_SWEEP; walked++) {
    const entry = await journal.findOne({ _id: journalId(opts.topicId, partition, raised) }, { projection: { next: 1, newest: 1 } });
    if (!entry || entry.newest.getTime() >= cutoff) break;
    raised = entry.next;
  }
  if (raised > floor.offset) {
    await floors.updateOne({ _id: floor._id }, { $max: { offset: raised }, $set: { at: now } });
    counts.floor = raised;
  }
  return counts;
}

/** Keeps each partition's floor for FLOOR_CACHE_MS, for readers (one `_id` read per partition and interval). */
class FloorCache {
  private readonly known = new Map<number, { offset: number; readAt: number }>();

  constructor(
    private readonly pages: PagesCollection,
    private readonly ttlMs = FLOOR_CACHE_MS,
  ) {}

  /** The first offset retained in `partition` (0 when nothing has expired). */
  async floor(partition: number): Promise<number> {
    const kept = this.known.get(partition);
    if (kept && Date.now() - kept.readAt < this.ttlMs) return kept.offset;
    const doc = (await this.pages.findOne({ _id: floorId(partition) } as never)) as unknown as FloorDoc | null;
    const offset = doc?.offset ?? 0;
    this.known.set(partition, { offset, readAt: Date.now() });
    return offset;
  }
}

const caches = new WeakMap<PagesCollection, FloorCache>();

/** The floor cache of a pages collection (one per collection object in the process). */
export function floorCacheOf(pages: PagesCollection): FloorCache {
  let cache = caches.get(pages);
  if (!cache) caches.set(pages, (cache = new FloorCache(pages)));
  return cache;
}

