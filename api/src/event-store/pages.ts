/**
 * The account streams: history addressed by `_id` only. FerretDB pushes down
 * nothing but `_id` equality (an `_id` range with sort and limit, or an `_id`
 * $in, scans the whole collection), so each account's events on its partition
 * are also kept as numbered pages: `<stream>:<n>` holds a run of consecutive
 * events of the stream (oldest first, at most PAGE_EVENTS of them and about
 * PAGE_BYTES); directories `<stream>:d<k>` list where pages start, DIR_PAGES
 * each, and the head `<stream>:h` says how many pages there are and where
 * each directory starts.
 * A stream is all the account's events, or those of one type (so a rare type
 * is read from its own stream, never by scanning the account's history).
 * A read of `limit` events is the head, one directory and about
 * limit / PAGE_EVENTS + 1 page lookups, whatever the size of the store.
 *
 * Written by the materializer, the single writer of a partition, after the
 * events and before the watermark. Idempotent by offset: an event at or below
 * the last offset a page holds is already there, so a batch delivered again
 * after a crash or a rebalance adds nothing. Where a page ends depends only on
 * the events of the stream (count and bytes), not on how the log was chunked,
 * so a rewrite builds the same pages. Pages and directories are written
 * before the head that counts them. Every write is a replace filtered by `_id` alone: FerretDB
 * pushes a filter down to SQL only when it is exactly `{_id}` (any other
 * field, even beside `_id`, scans the collection on every write).
 *
 * Fenced writes. The consumer group gives a partition one owner, but a
 * process stalled past the session timeout (GC, SIGSTOP, a frozen store)
 * wakes still holding a chunk, and a check of ownership before a write does
 * not help when the write itself stalls after it. So every writer of a
 * partition first claims an epoch: it inserts `#claim:<topic id>:<p>:<E>`,
 * the smallest E not claimed yet (a unique insert: two writers never get the
 * same epoch, also on FerretDB, which applies conditional updates
 * read-then-write but enforces unique `_id`s atomically; a `$inc` counter
 * could hand one epoch to two writers). Epochs are dense, so a newer claim
 * exists exactly when `#claim:…:<E+1>` does. Each page, directory and head
 * write then goes as one ordered update command of two statements: a `$inc`
 * on `#claim:…:<E+1>` (matches nothing while no newer claim exists; fails
 * with TypeMismatch once one does, its `fence` field being a string), then
 * the replace, which an ordered command does not run after a failed
 * statement. The check travels with the write, so a write sent late is
 * checked when the store runs it; both statements are `_id` equality. A
 * claim is made before the writer reads the streams' state, so it sees
 * everything the older writer wrote before the claim. Left open on FerretDB:
 * the store runs the two statements one after the other, not atomically, so a
 * stale write whose guard ran just before the newer claim was inserted can
 * still land after it; it needs the old writer's command to be inside the
 * store at that very moment (the new owner claims only after the old one's
 * session expired), and it ends there: its next write is refused.
 * See docs/architecture.md.
 *
 * A page's events are stored packed: one binary field holding the BSON of
 * `{events}` (FerretDB converts each nested field on every read, so a page of
 * 100 nested events cost about four times as much to fetch). Pages stored
 * before that, with `events` as nested documents, are read as they are and
 * packed when next rewritten.
 */
import { Binary, BSON, type Collection } from 'mongodb';
import type { EventType } from '#shared/eventlog/types.js';
import type { EventDoc, EventPageDirDoc, EventPageDoc, EventPageHeadDoc } from '#shared/mongo/documents.js';
import type { PageCache } from './page-cache.js';
import { isDuplicateKey } from '#shared/mongo/index.js';

export type PagesCollection = Collection<EventPageDoc | EventPageHeadDoc | EventPageDirDoc>;
type PageWrite = EventPageDoc | EventPageHeadDoc | EventPageDirDoc | JournalDoc;

/** Events per page: a page of 100 spans at most two pages. */
const PAGE_EVENTS = 100;
/** Bytes of events per page (BSON); a bigger event gets a page of its own (16 MB is the document limit). */
const PAGE_BYTES = 512 * 1024;

/** The stream of an account on a partition: all its events (type null), or those of one type. */
export function streamId(accountId: string, partition: number, type: EventType | null): string {
  const base = `${encodeURIComponent(accountId)}:${partition}`;
  return type === null ? base : `${base}:${type}`;
}

export function pageId(stream: string, n: number): string {
  return `${stream}:${n}`;
}

export function headId(stream: string): string {
  return `${stream}:h`;
}

export function dirId(stream: string, k: number): string {
  return `${stream}:d${k}`;
}

/** Pages listed per directory document. */
const DIR_PAGES = 256;

/** A page as the writer builds it: its events unpacked. */
interface OpenPage {
  _id: string;
  first: number;
  last: number;
  bytes: number;
  events: EventDoc[];
}

/** The page as stored: its events packed into one binary field. */
function packPage(page: OpenPage): EventPageDoc {
  return { _id: page._id, first: page.first, last: page.last, bytes: page.bytes, count: page.events.length, packed: new Binary(BSON.serialize({ events: page.events })) };
}

/** The events a stored page holds, oldest first: packed (current layout) or nested (pages written before it). */
export function pageEvents(page: EventPageDoc): EventDoc[] {
  if (page.packed) return unpack(binaryBytes(page.packed));
  return page.events ?? [];
}

function unpack(packed: Uint8Array): EventDoc[] {
  return (BSON.deserialize(packed) as { events: EventDoc[] }).events;
}

function binaryBytes(value: Binary): Uint8Array {
  return value.buffer.subarray(0, value.position);
}

/** What the writer knows of a stream: where its pages start and the newest page. */
interface StreamState {
  /** Pages of the stream, and where each directory starts. */
  pages: number;
  dirs: number[];
  /** Where each page of the newest directory starts. */
  dir: number[];
  /** The newest page (null: the stream has none yet). */
  page: OpenPage | null;
}

/** A partition's claim of epoch `epoch` (see the top of this file). */
function claimId(topicId: string, partition: number, epoch: number): string {
  return `#claim:${topicId}:${partition}:${epoch}`;
}

/** Where the newest epoch of a partition was last seen: only where the search for a free epoch starts. */
function claimHintId(topicId: string, partition: number): string {
  return `#claims:${topicId}:${partition}`;
}

/** A write refused because a newer writer claimed the partition: this writer lost it. */
export class FencedError extends Error {
  constructor(
    readonly partition: number,
    readonly epoch: number,
  ) {
    super(`partition ${partition} was claimed by a newer writer (epoch above ${epoch}); this writer lost it`);
    this.name = 'FencedError';
  }
}

/** Streams whose state the writer keeps between chunks (each holds at most one page). */
const CACHED_STREAMS = 2000;

interface PageWriterOptions {
  pageEvents?: number;
  pageBytes?: number;
  dirPages?: number;
  /** Test hook, called after the pages of a chunk are written and before the heads: 'crash' stops there. */
  afterPages?: () => 'crash' | void;
  /** The event topic's Kafka id once the topic guard checked it (null before: nothing is written); see EventPageHeadDoc.topic_id. */
  topicId?: () => string | null;
  /** Test hook, awaited before each page, directory or head write (a writer stalled there). */
  beforeWrite?: (id: string, partition: number, epoch: number) => Promise<void> | void;
}

/**
 * Appends events to their streams. The state of a stream (head and newest
 * page) is kept between chunks of the same partition as long as they follow
 * each other: a chunk that does not start where the last one of this process
 * ended (another writer owned the partition meanwhile), or any failure,
 * forgets the partition's streams, which are read again from the store.
 */
export class PageWriter {
  private readonly states = new Map<string, StreamState>();
  /** Per partition: the offset after the last chunk written by this process. */
  private readonly nextOffset = new Map<number, bigint>();
  /** Per partition: the epoch this writer claimed (absent: claimed again before the next chunk). */
  private readonly epochs = new Map<number, number>();
  /** Per partition: the newest epoch this process saw claimed (where the next search starts). */
  private readonly newestSeen = new Map<number, number>();
  private readonly pageEvents: number;
  private readonly pageBytes: number;
  private readonly dirPages: number;
  /** The topic id the kept states were read or written under. */
  private topicId: string | undefined;

  constructor(
    private readonly pages: PagesCollection,
    private readonly opts: PageWriterOptions = {},
  ) {
    this.pageEvents = opts.pageEvents ?? PAGE_EVENTS;
    this.pageBytes = opts.pageBytes ?? PAGE_BYTES;
    this.dirPages = opts.dirPages ?? DIR_PAGES;
  }

  /**
   * Writes the events of a chunk of `partition` (offsets firstOffset..lastOffset
   * of the log, in order) into their streams. Returns false when the test
   * hook stopped it.
   */
  async write(partition: number, docs: readonly EventDoc[], firstOffset: bigint, lastOffset: bigint): Promise<boolean> {
    const topicId = this.opts.topicId ? this.opts.topicId() : undefined;
    if (topicId === null) throw new Error('the event topic is not checked against MongoDB yet (topic guard); no pages are written until it is');
    if (topicId !== this.topicId) {
      this.states.clear();
      this.nextOffset.clear();
      this.epochs.clear();
      this.newestSeen.clear();
      this.topicId = topicId;
    }
    if (this.nextOffset.get(partition) !== firstOffset) this.forget(partition);
    this.nextOffset.delete(partition);
    try {
      // Claimed before the state is read: the streams are read as the older writer left them.
      let epoch = this.epochs.get(partition);
      if (epoch === undefined) {
        epoch = await this.claim(partition, topicId ?? '');
        this.epochs.set(partition, epoch);
      }
      const fence = claimId(topicId ?? '', partition, epoch + 1);
      const byStream = new Map<string, EventDoc[]>();
      for (const doc of docs) {
        for (const stream of [streamId(doc.account_id, partition, null), streamId(doc.account_id, partition, doc.type)]) {
          const list = byStream.get(stream);
          if (list) list.push(doc);
          else byStream.set(stream, [doc]);
        }
      }
      const pageWrites: PageWrite[] = [];
      const headWrites: PageWrite[] = [];
      const updated: [string, StreamState][] = [];
      const started: [string, number][] = [];
      for (const [stream, events] of byStream) {
        const state = await this.load(stream);
        const next = this.append(stream, state, events, pageWrites);
        startedWithin(stream, next, this.dirPages, Number(firstOffset), Number(lastOffset), started);
        if (next.pages !== state.pages) {
          const head: EventPageHeadDoc = { _id: headId(stream), pages: next.pages, per_dir: this.dirPages, dirs: next.dirs, ...(topicId ? { topic_id: topicId } : {}) };
          headWrites.push(head);
        }
        updated.push([stream, next]);
      }
      // The chunk's entry in the partition's journal (retention.ts): after its pages, before the heads and the watermark.
      pageWrites.push(journalEntry(topicId ?? '', partition, docs, firstOffset, lastOffset, started, this.dirPages));
      await this.bulk(pageWrites, partition, epoch, fence);
      if (this.opts.afterPages?.() === 'crash') {
        this.forget(partition);
        return false;
      }
      await this.bulk(headWrites, partition, epoch, fence);
      for (const [stream, state] of updated) this.remember(stream, state);
      this.nextOffset.set(partition, lastOffset + 1n);
      return true;
    } catch (err) {
      this.forget(partition);
      throw err;
    }
  }

  /**
   * The stream's state after appending `events` (those above its last offset;
   * the rest are there already), and the page writes that store it.
   */
  private append(stream: string, state: StreamState, events: EventDoc[], writes: PageWrite[]): StreamState {
    let pages = state.pages;
    const dirs = [...state.dirs];
    let dir = [...state.dir]; // the kept state stays as stored until the writes succeed
    let page = state.page;
    const changed = new Map<number, OpenPage>();
    const changedDirs = new Map<number, number[]>();
    for (const doc of events) {
      if (page && doc.offset <= page.last) continue;
      const size = BSON.calculateObjectSize(doc);
      if (!page || page.events.length >= this.pageEvents || (page.events.length > 0 && page.bytes + size > this.pageBytes)) {
        const n = pages;
        pages += 1;
        const k = Math.floor(n / this.dirPages);
        if (n % this.dirPages === 0) {
          dirs.push(doc.offset);
          dir = [doc.offset];
        } else dir.push(doc.offset);
        changedDirs.set(k, dir);
        page = { _id: pageId(stream, n), first: doc.offset, last: doc.offset, bytes: 0, events: [] };
      } else if (changed.get(pages - 1) !== page) {
        page = { ...page, events: [...page.events] }; // the kept state stays as stored until the writes succeed
      }
      page.events.push(doc);
      page.last = doc.offset;
      page.bytes += size;
      changed.set(pages - 1, page);
    }
    for (const p of changed.values()) writes.push(packPage(p));
    for (const [k, starts] of changedDirs) writes.push({ _id: dirId(stream, k), starts });
    return { pages, dirs, dir, page };
  }

  /** The stream's state: kept from the last chunk, or read (head, its newest directory and page) by `_id`. */
  private async load(stream: string): Promise<StreamState> {
    const kept = this.states.get(stream);
    if (kept) return kept;
    const head = (await this.pages.findOne({ _id: headId(stream) })) as EventPageHeadDoc | null;
    if (!head || head.pages === 0) return { pages: 0, dirs: [], dir: [], page: null };
    // A stream of an earlier topic of this name (deleted and created again: offsets from 0 again) starts over.
    if (this.topicId && head.topic_id && head.topic_id !== this.topicId) return { pages: 0, dirs: [], dir: [], page: null };
    const n = head.pages - 1;
    const k = Math.floor(n / head.per_dir);
    // Pages and directories are written before the head: what lies beyond the head's count (a crash in between) is dropped and rewritten.
    const dirDoc = (await this.pages.findOne({ _id: dirId(stream, k) })) as EventPageDirDoc | null;
    const dir = (dirDoc?.starts ?? []).slice(0, n - k * head.per_dir + 1);
    const stored = (await this.pages.findOne({ _id: pageId(stream, n) })) as EventPageDoc | null;
    const page = stored ? { _id: stored._id, first: stored.first, last: stored.last, bytes: stored.bytes, events: pageEvents(stored) } : { _id: pageId(stream, n), first: dir.at(-1) ?? 0, last: -1, bytes: 0, events: [] };
    return { pages: head.pages, dirs: head.dirs.slice(0, k + 1), dir, page };
  }

  /**
   * Each a replace by `_id` (idempotent), one after the other, each fenced:
   * one ordered update command, the guard on the next epoch's claim first
   * (see the top of this file). Not several to a command: FerretDB 1.24
   * (SQLite) keeps a connection of the database's pool (100) for every
   * statement that matched a document until the command ends, so a command
   * of ~100 replaces hangs the database for ever; and with a few to a
   * command, though cheaper in CPU, the WAL grew several times faster per
   * write (docs/performance.md, scripts/bench/page-writes.mjs).
   */
  private async bulk(writes: PageWrite[], partition: number, epoch: number, fence: string): Promise<void> {
    for (const w of writes) {
      await this.opts.beforeWrite?.(w._id, partition, epoch);
      try {
        await this.pages.bulkWrite(
          [
            { updateOne: { filter: { _id: fence }, update: { $inc: { fence: 1 } } as never } },
            { replaceOne: { filter: { _id: w._id }, replacement: w, upsert: true } },
          ],
          { ordered: true },
        );
      } catch (err) {
        if (isFenceRefusal(err)) throw new FencedError(partition, epoch);
        throw err;
      }
    }
  }

  /**
   * Claims the smallest epoch of the partition not claimed yet, by unique
   * insert (the only write FerretDB applies atomically against a concurrent
   * one). Starts from the newest epoch seen here or noted in the hint
   * document; the hint is raised with $max and may lag (then a few inserts
   * fail as duplicates), never lead.
   */
  private async claim(partition: number, topicId: string): Promise<number> {
    const hint = (await this.pages.findOne({ _id: claimHintId(topicId, partition) })) as unknown as { newest?: number } | null;
    let epoch = Math.max(hint?.newest ?? 0, this.newestSeen.get(partition) ?? 0) + 1;
    for (;;) {
      try {
        await this.pages.insertOne({ _id: claimId(topicId, partition, epoch), fence: 'claimed', at: new Date() } as never);
        break;
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
        epoch += 1;
      }
    }
    this.newestSeen.set(partition, epoch);
    await this.pages.updateOne({ _id: claimHintId(topicId, partition) }, { $max: { newest: epoch } } as never, { upsert: true });
    return epoch;
  }

  private remember(stream: string, state: StreamState): void {
    this.states.delete(stream);
    this.states.set(stream, state);
    if (this.states.size > CACHED_STREAMS) this.states.delete(this.states.keys().next().value as string);
  }

  /** Forgets every partition: the next chunk of each claims it again (a new consumer, whose predecessor may still be writing). */
  forgetAll(): void {
    this.states.clear();
    this.nextOffset.clear();
    this.epochs.clear();
  }

  private forget(partition: number): void {
    this.nextOffset.delete(partition);
    this.epochs.delete(partition);
    for (const stream of this.states.keys()) if (partitionOf(stream) === partition) this.states.delete(stream);
  }
}

/**
 * The pages of `stream` that start at an offset of the chunk [first, last]:
 * those the chunk opened, or a rewrite of it after a crash finds already there
 * (the newest directory's; a chunk opening pages across a directory boundary
 * lists only those of the newest directory).
 */
function startedWithin(stream: string, state: StreamState, dirPages: number, first: number, last: number, out: [string, number][]): void {
  const base = (state.dirs.length - 1) * dirPages;
  for (let i = state.dir.length - 1; i >= 0; i--) {
    const start = state.dir[i] as number;
    if (start < first) break;
    if (start <= last) out.push([stream, base + i]);
  }
}

/** The journal entry of partition `partition`'s chunk starting at `first` (retention.ts). */
export function journalId(topicId: string, partition: number, first: number): string {
  return `#j:${topicId}:${partition}:${first}`;
}

/** What the retention sweep needs of a chunk: where the next one starts, its newest event, the events it stored and the pages it opened. */
export interface JournalDoc {
  _id: string;
  first: number;
  next: number;
  /** created_at of the chunk's newest event: the chunk expires once that is older than the retention. */
  newest: Date;
  per_dir: number;
  /** BSON of `{ids: string[], started: [stream, n][]}`. */
  packed: Binary;
}

function journalEntry(topicId: string, partition: number, docs: readonly EventDoc[], first: bigint, last: bigint, started: [string, number][], dirPages: number): JournalDoc {
  let newest = 0;
  for (const d of docs) newest = Math.max(newest, d.created_at instanceof Date ? d.created_at.getTime() : 0);
  return {
    _id: journalId(topicId, partition, Number(first)),
    first: Number(first),
    next: Number(last) + 1,
    newest: new Date(newest),
    per_dir: dirPages,
    packed: new Binary(BSON.serialize({ ids: docs.map((d) => d._id), started })),
  };
}

/** The event ids and opened pages of a journal entry. */
export function journalContents(doc: JournalDoc): { ids: string[]; started: [string, number][] } {
  return BSON.deserialize(binaryBytes(doc.packed)) as { ids: string[]; started: [string, number][] };
}

/** The guard statement (the first) failed: a newer claim exists, its `fence` a string that `$inc` refuses. */
function isFenceRefusal(err: unknown): boolean {
  const found = (err as { writeErrors?: unknown } | null)?.writeErrors;
  if (found === undefined || found === null) return false;
  const errors = (Array.isArray(found) ? found : [found]) as { index?: number; code?: number }[];
  return errors.some((e) => e.index === 0 && e.code === 14);
}

function partitionOf(stream: string): number {
  return Number(stream.split(':')[1]);
}

/**
 * Events of a stream with offsets in (after, upTo], oldest first, at most
 * `limit`: the head, then the page holding the first offset after `after`
 * and the ones following it, each by `_id`. `after` null: from the oldest.
 * With a cache, a full directory or page (below the stream's newest: it never
 * changes again) is read from memory when it is there, and kept once read;
 * the head and the newest page and directory are always read from the store.
 */
export async function readStream(pages: PagesCollection, stream: string, after: bigint | null, upTo: bigint, limit: number, cache?: PageCache): Promise<EventDoc[]> {
  if (limit <= 0 || (after !== null && after >= upTo)) return [];
  const head = (await pages.findOne({ _id: headId(stream) })) as EventPageHeadDoc | null;
  if (!head || head.pages === 0) return [];
  const out: EventDoc[] = [];
  const low = after === null ? -Infinity : Number(after);
  const high = Number(upTo);
  const k = Math.max(0, lastAtOrBelow(head.dirs, low));
  const starts = await readDir(pages, head, stream, k, cache);
  if (!starts) return out; // listed but not there: never the case (directories are written before their head)
  for (let n = k * head.per_dir + Math.max(0, lastAtOrBelow(starts, low)); n < head.pages && out.length < limit; n++) {
    const events = await readPage(pages, head, stream, n, cache);
    if (!events || (events[0] !== undefined && events[0].offset > high)) break; // a page listed is always there (written before the head); stop rather than skip
    for (const doc of events) {
      if (doc.offset <= low) continue;
      if (doc.offset > high || out.length >= limit) return out;
      out.push(doc);
    }
  }
  return out;
}

/** Where the pages of directory k start: from the cache when it is full and there, else by `_id` (and kept when full). */
async function readDir(pages: PagesCollection, head: EventPageHeadDoc, stream: string, k: number, cache?: PageCache): Promise<readonly number[] | null> {
  const id = dirId(stream, k);
  const full = cache?.enabled === true && k < head.dirs.length - 1;
  const topic = head.topic_id ?? '';
  if (full) {
    const kept = cache.dir(topic, id);
    if (kept) return kept.starts;
  }
  const dir = (await pages.findOne({ _id: id })) as EventPageDirDoc | null;
  if (!dir) return null;
  if (full && dir.starts.length >= head.per_dir) cache.keepDir(topic, id, dir.starts);
  return dir.starts;
}

/** The events of page n: from the cache when it is full and there, else by `_id` (and kept when full). */
async function readPage(pages: PagesCollection, head: EventPageHeadDoc, stream: string, n: number, cache?: PageCache): Promise<readonly EventDoc[] | null> {
  const id = pageId(stream, n);
  const full = cache?.enabled === true && n < head.pages - 1;
  const topic = head.topic_id ?? '';
  if (full) {
    const kept = cache.page(topic, id);
    if (kept) return unpack(kept.packed);
  }
  const page = (await pages.findOne({ _id: id })) as EventPageDoc | null;
  if (!page) return null;
  const events = pageEvents(page);
  if (full && events.length > 0) cache.keepPage(topic, id, page.packed ? binaryBytes(page.packed).slice() : BSON.serialize({ events })); // a copy: the driver's value is a view of the whole reply
  return events;
}

/** Index of the last start <= offset (-1 when none): the page that may hold the first event after it. */
function lastAtOrBelow(starts: readonly number[], offset: number): number {
  let lo = 0;
  let hi = starts.length - 1;
  let found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if ((starts[mid] as number) <= offset) {
      found = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return found;
}
