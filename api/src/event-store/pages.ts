/**
 * The account streams: history addressed by `_id` only. FerretDB pushes down
 * nothing but `_id` equality (an `_id` range with sort and limit, or an `_id`
 * $in, scans the whole collection), so each account's events on its partition
 * are kept as streams of documents numbered by `_id`. A stream is all the
 * account's events, or those of one type (so a rare type is read from its own
 * stream, never by scanning the account's history); a type stream's entries
 * are offsets into the account's stream, not a copy of the event.
 *
 * Append-only, in two steps:
 *  - On the write path, per chunk of the log, each account the chunk touches
 *    gets one fragment of its stream, `<stream>:f<n>` (n = 0, 1, 2, …): its
 *    events in that chunk. The fragments of a chunk go to the store as one
 *    `insert` command, after the chunk's journal entry (retention.ts) in one
 *    fenced `update` command: two commands per chunk whatever it touches,
 *    and every event's bytes written once, in a new document. Nothing already
 *    holding events is rewritten. Type streams get no fragment: their newest
 *    entries are the account's fragments, filtered by type.
 *  - Off the write path (after the watermark), an account stream with
 *    FRAGMENTS fragments, or enough entries for a full page, is compacted:
 *    its fragments' entries become new pages `<stream>:<n>` (at most
 *    PAGE_EVENTS entries and about PAGE_BYTES; the last may hold fewer, and
 *    is never extended), and their offsets new pages of each type's stream;
 *    directories `<stream>:d<k>` list where pages start (DIR_PAGES each), and
 *    the head `<stream>:h` says how many pages there are, where each
 *    directory starts, the last offset the pages hold (`through`) and, for an
 *    account stream, the first fragment not compacted (`frag`). The type
 *    streams' pages and heads are written before the account's head, a few
 *    streams to a fenced command (MATCHED_PER_COMMAND); then the compacted
 *    fragments are deleted, in one command.
 * A read is the head, a directory and the pages from the cursor on (binary
 * searches), then the account's fragments from `frag` up to the first
 * missing one (fewer than FRAGMENTS while compaction keeps up), all by `_id`;
 * a type stream's read takes the account's head first, then the type's, so
 * the type's pages reach at least where the account's fragments begin. A
 * fragment missing because a compaction deleted it after the reader read the
 * head is told from the stream's end by reading the head again: a
 * compaction writes the head before it deletes. A compaction stopped between
 * its head and its delete leaves those fragments below `frag`, never read
 * again and never deleted (a few documents per crash).
 *
 * Written by the materializer, the single writer of a partition, after the
 * events' ids (the events collection holds no body: a stream's entries are
 * the only copy of each event) and before the watermark. Idempotent by offset: the writer knows
 * the last offset each stream holds and writes only entries above it, so a
 * batch delivered again after a crash or a rebalance adds nothing. A
 * fragment number already taken (another writer's insert) fails as a
 * duplicate `_id`: the writer reads the stream again and writes what is
 * still missing.
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
 * exists exactly when `#claim:…:<E+1>` does. Every write that replaces a
 * document (the journal entry; a compaction's pages, directories and heads) goes
 * as one ordered update command whose first statement is a `$inc` on
 * `#claim:…:<E+1>` (matches nothing while no newer claim exists; fails with
 * TypeMismatch once one does, its `fence` field being a string), which an
 * ordered command does not go past; a chunk's fragment inserts are sent only
 * after its guarded journal write was answered. The check travels with the
 * write, so a write sent late is checked when the store runs it; every
 * statement is `_id` equality. A claim is made before the writer reads the
 * streams' state, so it sees everything the older writer wrote before the
 * claim. Left open on FerretDB: the store runs the statements one after the
 * other, not atomically, so a stale write whose guard ran just before the
 * newer claim was inserted can still land after it; it needs the old
 * writer's command to be inside the store at that very moment (the new owner
 * claims only after the old one's session expired), and it ends there: its
 * next write is refused. A stale fragment insert cannot replace anything: it
 * either takes a number the new owner then finds taken (and reads again), or
 * lands below the head's `frag`, where nothing reads it.
 * See docs/architecture.md.
 *
 * Entries are stored packed: one binary field, `deflated`, holding the BSON
 * of `{events}` deflated (node:zlib raw deflate, level 1), each event
 * without `account_id`, `partition` and `cursor` where they are the stream's
 * account, its partition and the cursor of (partition, offset); the reader
 * puts them back (stripEntry, restoreEntry), so it returns the EventDocs
 * written. FerretDB converts each nested field on every read (a page of 100
 * nested events cost about four times as much to fetch), and its SQLite
 * backend keeps a binary value as base64 in JSON: deflated, an event of
 * ~300 bytes of JSON takes ~120 bytes of a page of 100. `bytes` still counts the
 * BSON of the whole events, not what is stored. Pages stored before that,
 * with `packed` (the BSON of the whole events, not deflated) or with
 * `events` as nested documents, are read as they are; pages and
 * heads written before fragments existed (no `frag`, no `through`; type
 * pages holding whole events) are read as they are, and fragments and pages
 * are appended after them.
 */
import { deflateRawSync, inflateRawSync } from 'node:zlib';
import { Binary, BSON, type Collection } from 'mongodb';
import { encodeCursor } from '#shared/cursor.js';
import type { EventType } from '#shared/eventlog/types.js';
import type { EventDoc, EventPageDirDoc, EventPageDoc, EventPageHeadDoc } from '#shared/mongo/documents.js';
import type { PageCache } from './page-cache.js';
import { isDuplicateKey } from '#shared/mongo/index.js';

export type PagesCollection = Collection<EventPageDoc | EventPageHeadDoc | EventPageDirDoc>;
type PageWrite = EventPageDoc | EventPageHeadDoc | EventPageDirDoc | JournalDoc | StartedDoc;

/** Entries per page: a read of 100 spans at most two pages. */
const PAGE_EVENTS = 100;
/** Bytes of entries per page (BSON); a bigger event gets a page of its own (16 MB is the document limit). */
const PAGE_BYTES = 512 * 1024;
/** Fragments a stream may gather before it is compacted (a read at the stream's end looks up at most this many). */
const FRAGMENTS = 16;
/**
 * Documents that exist replaced per compaction command (about two per stream:
 * its head and newest directory): FerretDB 1.24 (SQLite) keeps a connection of the
 * database's pool (100) for every statement that matched a document until
 * the command ends, so a command must stay well below 100 of them, counting
 * the partitions written at once.
 */
const MATCHED_PER_COMMAND = 16;
/** Streams due by their fragments that make a compaction run at once; fewer wait at most DUE_WAIT_MS (a read meanwhile looks up a few more fragments). */
const DUE_PER_RUN = 8;
const DUE_WAIT_MS = 1000;
/**
 * Most streams one compaction run takes, those with the most entries first:
 * streams that fill at the same pace fall due together (every account of a
 * partition at once, when the load is spread evenly), and one run of them all
 * held the partition's next chunk for as long as it took. The rest wait for
 * the next chunk's run (a read meanwhile looks up a few more fragments).
 */
const MOST_PER_RUN = 16;
/** Fragments deleted per command. */
const DELETES_PER_COMMAND = 500;
/** Fragments a reader looks up at once. */
const PROBE_BATCH = 4;

/** An entry of a stream: an event (the account's stream, and type pages written before offsets), or the offset of one (a type stream). */
type Entry = EventDoc | { offset: number };

function isEvent(entry: Entry): entry is EventDoc {
  return '_id' in entry;
}

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

export function fragmentId(stream: string, n: number): string {
  return `${stream}:f${n}`;
}

/** The account id of a stream. */
function accountOf(stream: string): string {
  return decodeURIComponent(stream.split(':')[0] as string);
}

/** Pages listed per directory document. */
const DIR_PAGES = 256;

/** zlib level of the stored entries: 1 packs these pages about as small as 6 does (within 3%), for less CPU. */
const DEFLATE_LEVEL = 1;

/**
 * Entries packed as stored (a page or a fragment): the BSON of `{events}`,
 * each event without what its stream implies (stripEntry), deflated.
 * `bytes` stays the BSON size of the whole events (what PAGE_BYTES bounds).
 */
export function packed(_id: string, entries: readonly Entry[], bytes: number, topicId?: string): EventPageDoc {
  const stream = streamOf(_id);
  return {
    _id,
    first: (entries[0] as Entry).offset,
    last: (entries.at(-1) as Entry).offset,
    bytes,
    count: entries.length,
    deflated: new Binary(deflateRawSync(BSON.serialize({ events: entries.map((e) => stripEntry(stream, e)) }), { level: DEFLATE_LEVEL })),
    ...(topicId ? { topic_id: topicId } : {}),
  };
}

/** The account and partition of the stream a page or fragment `_id` belongs to (`<account>:<partition>[:<type>]:<n>`). */
function streamOf(id: string): { accountId: string; partition: number } {
  return { accountId: accountOf(id), partition: partitionOf(id) };
}

/**
 * An event as stored in its account's stream: without `account_id`,
 * `partition` and `cursor` when they are the stream's account, its partition
 * and the cursor of (partition, offset); restoreEntry puts them back. An
 * offset entry (a type stream) is stored as it is.
 */
function stripEntry(stream: { accountId: string; partition: number }, entry: Entry): Entry {
  if (!isEvent(entry)) return entry;
  const { account_id: accountId, partition, cursor, ...rest } = entry;
  const out: Record<string, unknown> = rest;
  if (accountId !== stream.accountId) out.account_id = accountId;
  if (partition !== stream.partition) out.partition = partition;
  if (cursor !== encodeCursor({ partition, offset: BigInt(entry.offset) })) out.cursor = cursor;
  return out as unknown as Entry;
}

/** Puts back what stripEntry left out, in place (the entry was just deserialized: a copy of nothing else). */
function restoreEntry(stream: { accountId: string; partition: number }, entry: Entry): Entry {
  if (!isEvent(entry)) return entry;
  const e = entry as Partial<EventDoc> & { _id: string; offset: number };
  if (e.account_id === undefined) e.account_id = stream.accountId;
  if (e.partition === undefined) e.partition = stream.partition;
  if (e.cursor === undefined) e.cursor = encodeCursor({ partition: e.partition, offset: BigInt(e.offset) });
  return entry;
}

/** The entries a stored page or fragment holds, oldest first: deflated, packed (written before deflating), or nested (before packing). */
export function pageEvents(page: EventPageDoc): EventDoc[] {
  return pageEntries(page) as EventDoc[];
}

function pageEntries(page: EventPageDoc): Entry[] {
  const bson = packedBson(page);
  if (bson) return unpack(page._id, bson);
  return page.events ?? [];
}

/**
 * The BSON of `{events}` a page or fragment stores (deflated or not), in bytes of its own (a page
 * cache may keep them: the driver's value is a view of the whole reply); null for nested events.
 */
function packedBson(page: EventPageDoc): Uint8Array | null {
  if (page.deflated) return inflateRawSync(binaryBytes(page.deflated));
  if (page.packed) return binaryBytes(page.packed).slice();
  return null;
}

/** The entries of the BSON of `{events}` stored as page or fragment `id`, with what their stream implies put back. */
function unpack(id: string, bytes: Uint8Array): Entry[] {
  const entries = (BSON.deserialize(bytes) as { events: Entry[] }).events;
  const stream = streamOf(id);
  return entries.map((e) => restoreEntry(stream, e));
}

function binaryBytes(value: Binary): Uint8Array {
  return value.buffer.subarray(0, value.position);
}

/** What the writer knows of a stream. */
interface StreamState {
  /** Pages of the stream, where each directory starts, where each page of the newest directory starts. */
  pages: number;
  dirs: number[];
  dir: number[];
  /** The last offset the pages hold (-1: none). */
  through: number;
  /** The first fragment not compacted, and the next fragment's number. */
  frag: number;
  next: number;
  /** The last offset the stream holds, pages or fragments (-1: none). */
  last: number;
  /** The entries of fragments frag .. next - 1, oldest first. */
  pending: Entry[];
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

/** Streams whose state the writer reads from the store at once. */
const LOADS_AT_ONCE = 8;
/** Streams whose state the writer keeps between chunks. */
const CACHED_STREAMS = 2000;

interface PageWriterOptions {
  pageEvents?: number;
  pageBytes?: number;
  dirPages?: number;
  /** Fragments a stream gathers before it is compacted (default FRAGMENTS). */
  fragments?: number;
  /** Streams due by their fragments that make a compaction run without waiting (default DUE_PER_RUN). */
  duePerRun?: number;
  /** Test hook, called after the fragments of a chunk are written: 'crash' stops there. */
  afterPages?: () => 'crash' | void;
  /** The event topic's Kafka id once the topic guard checked it (null before: nothing is written); see EventPageHeadDoc.topic_id. */
  topicId?: () => string | null;
  /** Test hook, awaited before each write command (a writer stalled there). */
  beforeWrite?: (id: string, partition: number, epoch: number) => Promise<void> | void;
}

/**
 * Appends events to their streams (write, one chunk at a time) and compacts
 * them (compact, after the chunk's watermark). The state of a stream is kept
 * between chunks of the same partition as long as they follow each other: a
 * chunk that does not start where the last one of this process ended
 * (another writer owned the partition meanwhile), or any failure, forgets the
 * partition's streams, which are read again from the store.
 */
export class PageWriter {
  private readonly states = new Map<string, StreamState>();
  /** The type streams' pages as this writer last wrote or read them (no fragments: their entries are the account's). */
  private readonly types = new Map<string, StreamState>();
  /** Per partition: the offset after the last chunk written by this process. */
  private readonly nextOffset = new Map<number, bigint>();
  /** Per partition: the epoch this writer claimed (absent: claimed again before the next chunk). */
  private readonly epochs = new Map<number, number>();
  /** Per partition: the newest epoch this process saw claimed (where the next search starts). */
  private readonly newestSeen = new Map<number, number>();
  private readonly pageEvents: number;
  private readonly pageBytes: number;
  private readonly dirPages: number;
  private readonly fragments: number;
  private readonly duePerRun: number;
  /** The topic id the kept states were read or written under. */
  private topicId: string | undefined;
  /** Per partition: since when a stream has been due for compaction, while fewer than DUE_PER_RUN are. */
  private readonly dueSince = new Map<number, number>();

  constructor(
    private readonly pages: PagesCollection,
    private readonly opts: PageWriterOptions = {},
  ) {
    this.pageEvents = opts.pageEvents ?? PAGE_EVENTS;
    this.pageBytes = opts.pageBytes ?? PAGE_BYTES;
    this.dirPages = opts.dirPages ?? DIR_PAGES;
    this.fragments = opts.fragments ?? FRAGMENTS;
    this.duePerRun = opts.duePerRun ?? DUE_PER_RUN;
  }

  /**
   * Writes the events of a chunk of `partition` (offsets firstOffset..lastOffset
   * of the log, in order) into their streams' fragments. Returns false when
   * the test hook stopped it.
   */
  async write(partition: number, docs: readonly EventDoc[], firstOffset: bigint, lastOffset: bigint): Promise<boolean> {
    const topicId = this.opts.topicId ? this.opts.topicId() : undefined;
    if (topicId === null) throw new Error('the event topic is not checked against MongoDB yet (topic guard); no pages are written until it is');
    if (topicId !== this.topicId) {
      this.states.clear();
      this.types.clear();
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
      // Only the account streams get fragments: a type stream's newest entries are its account's fragments, filtered by type.
      const byStream = new Map<string, Entry[]>();
      for (const doc of docs) {
        const account = streamId(doc.account_id, partition, null);
        const list = byStream.get(account);
        if (list) list.push(doc);
        else byStream.set(account, [doc]);
      }
      // A fragment number another writer took meanwhile (a duplicate _id): read the streams again and write what is missing.
      for (let attempt = 0; ; attempt++) {
        try {
          await this.writeChunk(partition, byStream, docs, firstOffset, lastOffset, epoch, fence, topicId);
          break;
        } catch (err) {
          if (!isDuplicateInsert(err) || attempt >= 3) throw err;
          for (const stream of byStream.keys()) this.states.delete(stream);
        }
      }
      if (this.opts.afterPages?.() === 'crash') {
        this.forget(partition);
        return false;
      }
      this.nextOffset.set(partition, lastOffset + 1n);
      return true;
    } catch (err) {
      this.forget(partition);
      throw err;
    }
  }

  private async writeChunk(partition: number, byStream: Map<string, Entry[]>, docs: readonly EventDoc[], firstOffset: bigint, lastOffset: bigint, epoch: number, fence: string, topicId: string | undefined): Promise<void> {
    const fragments: EventPageDoc[] = [];
    const updated: [string, StreamState][] = [];
    // The states not kept (a new owner's first chunk) are read a few streams at a time.
    const streams = [...byStream.keys()];
    const states = new Map<string, StreamState>();
    for (let i = 0; i < streams.length; i += LOADS_AT_ONCE) {
      const batch = streams.slice(i, i + LOADS_AT_ONCE);
      const loaded = await Promise.all(batch.map((stream) => this.load(stream, topicId, (writes) => this.fenced(writes, partition, epoch, fence))));
      batch.forEach((stream, j) => states.set(stream, loaded[j] as StreamState));
    }
    for (const [stream, entries] of byStream) {
      const state = states.get(stream) as StreamState;
      let from = 0;
      while (from < entries.length && (entries[from] as Entry).offset <= state.last) from++;
      if (from === entries.length) continue;
      const fresh = entries.slice(from);
      let bytes = 0;
      for (const e of fresh) bytes += BSON.calculateObjectSize(e);
      fragments.push(packed(fragmentId(stream, state.next), fresh, bytes, topicId));
      updated.push([stream, { ...state, next: state.next + 1, last: (fresh.at(-1) as Entry).offset, pending: [...state.pending, ...fresh] }]);
    }
    // The chunk's entry in the partition's journal (retention.ts), guarded; then the fragments, only once it was let through.
    await this.fenced([journalEntry(topicId ?? '', partition, docs, firstOffset, lastOffset)], partition, epoch, fence);
    if (fragments.length > 0) await this.pages.insertMany(fragments as never[], { ordered: true });
    for (const [stream, state] of updated) this.remember(stream, state);
  }

  /**
   * Compacts the streams of `partition` that gathered enough fragments (see the
   * top of this file): called after the chunk starting at `chunkFirst` is
   * written and its watermark raised. The pages each compaction starts are
   * listed under that chunk for retention (`#js:…`), before they are written.
   */
  async compact(partition: number, chunkFirst: bigint): Promise<number> {
    const epoch = this.epochs.get(partition);
    if (epoch === undefined) return 0;
    const topicId = this.topicId ?? '';
    const fence = claimId(topicId, partition, epoch + 1);
    const due: [string, StreamState][] = [];
    for (const [stream, state] of this.states) {
      if (partitionOf(stream) !== partition || state.next === state.frag) continue;
      if (state.next - state.frag >= this.fragments || state.pending.length >= this.pageEvents) due.push([stream, state]);
    }
    if (due.length === 0) {
      this.dueSince.delete(partition);
      return 0;
    }
    // A few streams at a time: a run's fixed commands (its list of started pages, a delete) are shared by the streams it compacts.
    // Only streams due by their count of fragments wait (they gather slowly); one with a page's worth of entries does not.
    const since = this.dueSince.get(partition) ?? Date.now();
    const urgent = due.some(([, state]) => state.pending.length >= this.pageEvents);
    if (!urgent && due.length < this.duePerRun && Date.now() - since < DUE_WAIT_MS) {
      this.dueSince.set(partition, since);
      return 0;
    }
    this.dueSince.delete(partition);
    if (due.length > MOST_PER_RUN) {
      due.sort(([, a], [, b]) => b.pending.length - a.pending.length);
      due.length = MOST_PER_RUN;
    }
    try {
      const plans: { stream: string; state: StreamState; next: StreamState; writes: PageWrite[]; matched: number }[] = [];
      const started: [string, number, number][] = [];
      for (const [stream, state] of due) {
        const writes: PageWrite[] = [];
        let matched = 0;
        // Each type's offsets go to its own stream's pages, written before the account's head (a reader reads that head first).
        const byType = new Map<EventType, Entry[]>();
        for (const e of state.pending) {
          const type = (e as EventDoc).type;
          const list = byType.get(type);
          if (list) list.push({ offset: e.offset });
          else byType.set(type, [{ offset: e.offset }]);
        }
        const typed: [string, StreamState][] = [];
        for (const [type, offsets] of byType) {
          const typeStream = streamId(accountOf(stream), partition, type);
          const typeState = this.types.get(typeStream) ?? (await this.loadPages(typeStream, topicId));
          const plan = this.paginate(typeStream, { ...typeState, pending: offsets });
          if (plan.started.length === 0) continue;
          writes.push(...plan.writes, this.headOf(typeStream, plan.next));
          started.push(...plan.started);
          typed.push([typeStream, plan.next]);
          matched += 2;
        }
        const own = this.paginate(stream, state);
        writes.push(...own.writes, this.headOf(stream, own.next));
        started.push(...own.started);
        plans.push({ stream, state, next: own.next, writes, matched: matched + 2 });
        for (const [typeStream, next] of typed) {
          this.types.delete(typeStream);
          this.types.set(typeStream, next);
          if (this.types.size > CACHED_STREAMS) this.types.delete(this.types.keys().next().value as string);
        }
      }
      // The list of started pages first (with what an earlier compaction after the same chunk listed: a chunk written again), in the first command; then the streams' pages, directories and heads, a few streams to a command.
      const listId = startedId(topicId, partition, Number(chunkFirst));
      const prior = (await this.pages.findOne({ _id: listId })) as unknown as StartedDoc | null;
      if (prior) started.unshift(...startedContents(prior));
      let writes: PageWrite[] = [{ _id: listId, per_dir: this.dirPages, packed: new Binary(BSON.serialize({ started })) }];
      let group: typeof plans = [];
      let matched = 0;
      const send = async (): Promise<void> => {
        if (writes.length === 0) return;
        await this.fenced(writes, partition, epoch, fence);
        for (const plan of group) this.remember(plan.stream, plan.next);
        writes = [];
        group = [];
        matched = 0;
      };
      for (const plan of plans) {
        if (matched > 0 && matched + plan.matched > MATCHED_PER_COMMAND) await send();
        writes.push(...plan.writes);
        group.push(plan);
        matched += plan.matched;
      }
      await send();
      // The fragments merged, in one command, once every head that moved past them is written.
      const gone: string[] = [];
      for (const plan of plans) for (let n = plan.state.frag; n < plan.state.next; n++) gone.push(fragmentId(plan.stream, n));
      for (let at = 0; at < gone.length; at += DELETES_PER_COMMAND) {
        await this.pages.bulkWrite(
          gone.slice(at, at + DELETES_PER_COMMAND).map((id) => ({ deleteOne: { filter: { _id: id } } })),
          { ordered: true },
        );
      }
      return plans.length;
    } catch (err) {
      this.forget(partition);
      throw err;
    }
  }

  private headOf(stream: string, state: StreamState): EventPageHeadDoc {
    return { _id: headId(stream), pages: state.pages, per_dir: this.dirPages, dirs: state.dirs, through: state.through, frag: state.frag, ...(this.topicId ? { topic_id: this.topicId } : {}) };
  }

  /** The pages the stream's pending entries make (new ones after the last, never extending it), and the state after them. */
  private paginate(stream: string, state: StreamState): { writes: PageWrite[]; next: StreamState; started: [string, number, number][] } {
    let pages = state.pages;
    const dirs = [...state.dirs];
    let dir = [...state.dir];
    const writes: PageWrite[] = [];
    const started: [string, number, number][] = [];
    const changedDirs = new Map<number, number[]>();
    let page: Entry[] = [];
    let bytes = 0;
    const close = (): void => {
      if (page.length === 0) return;
      const n = pages;
      pages += 1;
      const start = (page[0] as Entry).offset;
      if (n % this.dirPages === 0) {
        dirs.push(start);
        dir = [start];
      } else dir.push(start);
      changedDirs.set(Math.floor(n / this.dirPages), dir);
      writes.push(packed(pageId(stream, n), page, bytes));
      started.push([stream, n, start]);
      page = [];
      bytes = 0;
    };
    for (const entry of state.pending) {
      if (entry.offset <= state.through) continue;
      const size = BSON.calculateObjectSize(entry);
      if (page.length >= this.pageEvents || (page.length > 0 && bytes + size > this.pageBytes)) close();
      page.push(entry);
      bytes += size;
    }
    close();
    for (const [k, starts] of changedDirs) writes.push({ _id: dirId(stream, k), starts });
    const through = Math.max(state.through, state.pending.at(-1)?.offset ?? -1);
    return { writes, started, next: { ...state, pages, dirs, dir, through, frag: state.next, pending: [] } };
  }

  /**
   * What the store holds of a stream's pages: the head and its newest
   * directory (and, for a head written before fragments, its newest page).
   * A head of an earlier topic of this name (deleted and created again:
   * offsets from 0 again) counts as none.
   */
  private async loadPages(stream: string, topicId: string | undefined): Promise<StreamState & { head: EventPageHeadDoc | null; stale: boolean }> {
    const head = (await this.pages.findOne({ _id: headId(stream) })) as EventPageHeadDoc | null;
    const stale = head !== null && topicId !== undefined && head.topic_id !== undefined && head.topic_id !== topicId;
    const state: StreamState = { pages: 0, dirs: [], dir: [], through: -1, frag: head?.frag ?? 0, next: 0, last: -1, pending: [] };
    if (!head || stale || head.pages === 0) return { ...state, head, stale };
    const n = head.pages - 1;
    const k = Math.floor(n / head.per_dir);
    const dirDoc = (await this.pages.findOne({ _id: dirId(stream, k) })) as EventPageDirDoc | null;
    const dir = (dirDoc?.starts ?? []).slice(0, n - k * head.per_dir + 1);
    let through = head.through;
    if (through === undefined) {
      // A head written before fragments: its newest page says where the pages end.
      const newest = (await this.pages.findOne({ _id: pageId(stream, n) })) as EventPageDoc | null;
      through = newest ? newest.last : (dir.at(-1) ?? 0) - 1;
    }
    return { ...state, pages: head.pages, dirs: head.dirs.slice(0, k + 1), dir, through, last: through, head, stale };
  }

  /** An account stream's state: kept from the last chunk, or read by `_id`: its pages (loadPages), then the fragments from `frag` to the first missing one. */
  private async load(stream: string, topicId: string | undefined, fenced: (writes: PageWrite[]) => Promise<void>): Promise<StreamState> {
    const kept = this.states.get(stream);
    if (kept) return kept;
    const { head, stale, ...loaded } = await this.loadPages(stream, topicId);
    let state: StreamState = loaded;
    let n = state.frag;
    for (;;) {
      const found = (await this.pages.findOne({ _id: fragmentId(stream, n) })) as EventPageDoc | null;
      if (!found) break;
      n += 1;
      if (topicId !== undefined && found.topic_id !== undefined && found.topic_id !== topicId) {
        // Another topic's fragment: the stream starts over after it.
        state = { ...state, pages: 0, dirs: [], dir: [], through: -1, frag: n, last: -1, pending: [] };
        continue;
      }
      const entries = pageEntries(found).filter((e) => e.offset > state.last);
      if (entries.length > 0) state = { ...state, last: (entries.at(-1) as Entry).offset, pending: [...state.pending, ...entries] };
    }
    state.next = n;
    if (stale || (state.frag !== (head?.frag ?? 0) && state.pages === 0)) {
      // Readers must not read the earlier topic's pages or fragments: a head of this topic, counting nothing yet, first.
      await fenced([this.headOf(stream, state)]);
    }
    return state;
  }

  /**
   * Replaces by `_id` (idempotent), fenced: one ordered update command, the
   * guard on the next epoch's claim first (see the top of this file). Never
   * many documents that exist to a command: FerretDB 1.24 (SQLite) keeps a
   * connection of the database's pool (100) for every statement that matched
   * a document until the command ends, so a command of ~100 replaces of
   * stored documents hangs the database for ever.
   */
  private async fenced(writes: PageWrite[], partition: number, epoch: number, fence: string): Promise<void> {
    await this.opts.beforeWrite?.((writes[0] as PageWrite)._id, partition, epoch);
    try {
      await this.pages.bulkWrite(
        [
          { updateOne: { filter: { _id: fence }, update: { $inc: { fence: 1 } } as never } },
          ...writes.map((w) => ({ replaceOne: { filter: { _id: w._id }, replacement: w as never, upsert: true } })),
        ],
        { ordered: true },
      );
    } catch (err) {
      if (isFenceRefusal(err)) throw new FencedError(partition, epoch);
      throw err;
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
    this.types.clear();
    this.nextOffset.clear();
    this.epochs.clear();
  }

  private forget(partition: number): void {
    this.nextOffset.delete(partition);
    this.epochs.delete(partition);
    for (const stream of this.states.keys()) if (partitionOf(stream) === partition) this.states.delete(stream);
    for (const stream of this.types.keys()) if (partitionOf(stream) === partition) this.types.delete(stream);
  }
}

/** The journal entry of partition `partition`'s chunk starting at `first` (retention.ts). */
export function journalId(topicId: string, partition: number, first: number): string {
  return `#j:${topicId}:${partition}:${first}`;
}

/** The pages the compaction after the chunk starting at `first` started (retention.ts). */
export function startedId(topicId: string, partition: number, first: number): string {
  return `#js:${topicId}:${partition}:${first}`;
}

/** What the retention sweep needs of a chunk: where the next one starts, its newest event, the events it stored. */
export interface JournalDoc {
  _id: string;
  first: number;
  next: number;
  /** created_at of the chunk's newest event: the chunk expires once that is older than the retention. */
  newest: Date;
  per_dir: number;
  /** BSON of `{ids: string[], started: [stream, n][]}` (`started`: pages the chunk opened, in journals written before fragments; empty since). */
  packed: Binary;
}

/** The pages a compaction started: BSON of `{started: [stream, n, first offset][]}`. */
export interface StartedDoc {
  _id: string;
  per_dir: number;
  packed: Binary;
}

function journalEntry(topicId: string, partition: number, docs: readonly EventDoc[], first: bigint, last: bigint): JournalDoc {
  let newest = 0;
  for (const d of docs) newest = Math.max(newest, d.created_at instanceof Date ? d.created_at.getTime() : 0);
  return {
    _id: journalId(topicId, partition, Number(first)),
    first: Number(first),
    next: Number(last) + 1,
    newest: new Date(newest),
    per_dir: DIR_PAGES,
    packed: new Binary(BSON.serialize({ ids: docs.map((d) => d._id), started: [] })),
  };
}

/** The event ids and opened pages of a journal entry. */
export function journalContents(doc: JournalDoc): { ids: string[]; started: [string, number][] } {
  return BSON.deserialize(binaryBytes(doc.packed)) as { ids: string[]; started: [string, number][] };
}

/** The pages a compaction started, with their first offsets. */
export function startedContents(doc: StartedDoc): [string, number, number][] {
  return (BSON.deserialize(binaryBytes(doc.packed)) as { started: [string, number, number][] }).started;
}

/** An insert found its `_id` taken (a fragment number another writer used). */
function isDuplicateInsert(err: unknown): boolean {
  if (isDuplicateKey(err)) return true;
  const found = (err as { writeErrors?: unknown } | null)?.writeErrors;
  const errors = (Array.isArray(found) ? found : found ? [found] : []) as { code?: number }[];
  return errors.length > 0 && errors.every((e) => e.code === 11000);
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
 * One read's view of a stream: its head, and the directories, pages and
 * fragments looked up by `_id` as needed (each at most once until the head
 * moves). With a cache, a page listed by the head (never rewritten), a
 * fragment (never rewritten) and a full directory are read from memory when
 * there, and kept once read; the head, the newest directory and the first
 * fragment not kept (the stream's end) are always read from the store.
 */
class StreamView {
  head: EventPageHeadDoc | null = null;
  private readonly dirsRead = new Map<number, readonly number[] | null>();
  private readonly pagesRead = new Map<number, readonly Entry[] | null>();
  private fragmentsRead: Entry[] | null = null;

  constructor(
    private readonly pages: PagesCollection,
    readonly stream: string,
    private readonly cache?: PageCache,
  ) {}

  /** Reads the head (again): true when its `frag` moved since the last read (a compaction ran, and may have deleted fragments). */
  async open(): Promise<boolean> {
    const before = this.head?.frag ?? 0;
    this.head = (await this.pages.findOne({ _id: headId(this.stream) })) as EventPageHeadDoc | null;
    const moved = (this.head?.frag ?? 0) !== before;
    this.dirsRead.clear();
    if (moved) this.pagesRead.clear();
    this.fragmentsRead = null;
    return moved;
  }

  /**
   * Hands `take` the pages' entries from the page at or below `after` on,
   * until it refuses one (false) or `full()`; true when the pages ran out.
   */
  async eachPageEntry(after: number, full: () => boolean, take: (e: Entry) => boolean): Promise<boolean> {
    const head = this.head;
    if (!head || head.pages === 0 || (head.through !== undefined && after >= head.through)) return true;
    const k = Math.max(0, lastAtOrBelow(head.dirs, after));
    const starts = await this.dir(k);
    if (!starts) return true;
    for (let n = k * head.per_dir + Math.max(0, lastAtOrBelow(starts, after)); n < head.pages; n++) {
      if (full()) return false;
      const entries = await this.page(n);
      if (!entries) continue; // a page listed is there (written before its head) unless retention deleted it: wholly below the floor
      for (const e of entries) if (!take(e)) return false;
    }
    return true;
  }

  /**
   * The entries of the fragments from the head's `frag` on, up to the first
   * missing one (or one starting above `upTo`). A fragment never changes once
   * written: with a cache, those kept are read from memory, up to the first
   * not kept, and the rest are kept once read; the first missing one is
   * always looked up in the store.
   */
  async fragments(upTo: number): Promise<Entry[]> {
    if (this.fragmentsRead) return this.fragmentsRead;
    const out: Entry[] = [];
    const topic = this.head?.topic_id;
    const cache = this.cache?.enabled === true ? this.cache : undefined;
    let n = this.head?.frag ?? 0;
    const done = (): Entry[] => (this.fragmentsRead = out);
    for (let kept = cache?.page(topic ?? '', fragmentId(this.stream, n)); kept; kept = cache?.page(topic ?? '', fragmentId(this.stream, n))) {
      const entries = unpack(fragmentId(this.stream, n), kept.packed);
      out.push(...entries);
      n += 1;
      if ((entries[0] as Entry).offset > upTo) return done();
    }
    // One lookup first (a stream just compacted has no fragment), then a few at a time.
    for (let batch = 1; ; batch = PROBE_BATCH) {
      const ids = Array.from({ length: batch }, (_, i) => fragmentId(this.stream, n + i));
      const found = (await Promise.all(ids.map((id) => this.pages.findOne({ _id: id })))) as (EventPageDoc | null)[];
      for (const doc of found) {
        if (!doc || (topic !== undefined && doc.topic_id !== undefined && doc.topic_id !== topic)) return done();
        const bson = packedBson(doc);
        const entries = bson ? unpack(doc._id, bson) : (doc.events ?? []);
        if (cache && bson && entries.length > 0) cache.keepPage(topic ?? '', doc._id, bson);
        out.push(...entries);
        if (doc.first > upTo) return done();
      }
      n += batch;
    }
  }

  /** Where the pages of directory k start: from the cache when it is full and there, else by `_id` (and kept when full). */
  private async dir(k: number): Promise<readonly number[] | null> {
    const memo = this.dirsRead.get(k);
    if (memo !== undefined) return memo;
    const head = this.head as EventPageHeadDoc;
    const id = dirId(this.stream, k);
    const full = this.cache?.enabled === true && k < head.dirs.length - 1;
    const topic = head.topic_id ?? '';
    if (full) {
      const kept = this.cache!.dir(topic, id);
      if (kept) return kept.starts;
    }
    const dir = (await this.pages.findOne({ _id: id })) as EventPageDirDoc | null;
    const starts = dir ? dir.starts : null;
    if (full && starts && starts.length >= head.per_dir) this.cache!.keepDir(topic, id, starts);
    this.dirsRead.set(k, starts);
    return starts;
  }

  /**
   * The entries of page n: from the cache when there, else by `_id` (and
   * kept). A page the head lists is never rewritten, except the newest of a
   * head written before fragments (no `through`), which is not kept.
   */
  private async page(n: number): Promise<readonly Entry[] | null> {
    const memo = this.pagesRead.get(n);
    if (memo !== undefined) return memo;
    const head = this.head as EventPageHeadDoc;
    const id = pageId(this.stream, n);
    const cacheable = this.cache?.enabled === true && (head.through !== undefined || n < head.pages - 1);
    const topic = head.topic_id ?? '';
    if (cacheable) {
      const kept = this.cache!.page(topic, id);
      if (kept) return unpack(id, kept.packed);
    }
    const page = (await this.pages.findOne({ _id: id })) as EventPageDoc | null;
    const bson = page ? packedBson(page) : null;
    const entries = page ? (bson ? unpack(id, bson) : (page.events ?? [])) : null;
    if (cacheable && page && entries && entries.length > 0) this.cache!.keepPage(topic, id, bson ?? BSON.serialize({ events: entries }));
    this.pagesRead.set(n, entries);
    return entries;
  }

  /** The events at `offsets` (ascending) in this (account) stream, through its directories, pages and fragments; those not found are left out. */
  async at(offsets: readonly number[]): Promise<Map<number, EventDoc>> {
    const out = new Map<number, EventDoc>();
    for (let attempt = 0; offsets.length > 0; attempt++) {
      const missing: number[] = [];
      for (const offset of offsets) {
        if (out.has(offset)) continue;
        const found = await this.inPages(offset);
        if (found) out.set(offset, found);
        else missing.push(offset);
      }
      if (missing.length === 0) return out;
      const fragments = await this.fragments(missing.at(-1) as number);
      const byOffset = new Map(fragments.filter(isEvent).map((e) => [e.offset, e]));
      for (const offset of missing) {
        const found = byOffset.get(offset);
        if (found) out.set(offset, found);
      }
      // Not found: below the retention floor, or a compaction moved the head (and deleted fragments) under the read.
      if (out.size === offsets.length || attempt >= 3 || !(await this.open())) return out;
    }
    return out;
  }

  private async inPages(offset: number): Promise<EventDoc | null> {
    const head = this.head;
    if (!head || head.pages === 0 || (head.through !== undefined && offset > head.through)) return null;
    const k = lastAtOrBelow(head.dirs, offset);
    if (k < 0) return null;
    const starts = await this.dir(k);
    if (!starts) return null;
    const i = lastAtOrBelow(starts, offset);
    if (i < 0) return null;
    const n = k * head.per_dir + i;
    if (n >= head.pages) return null;
    const entries = await this.page(n);
    const found = entries?.find((e) => e.offset === offset);
    return found && isEvent(found) ? found : null;
  }
}

/**
 * Events of an account's stream (type null) or of one of its type streams,
 * with offsets in (after, upTo], oldest first, at most `limit`, by `_id`
 * lookups only: the stream's pages from the one at or below `after`, then the
 * account's fragments (filtered by type for a type stream). The account's
 * head is read before the type stream's (a compaction writes them the other
 * way round), so a type head never counts fewer entries than the fragments
 * after the account's `frag` leave out. A read that ends at a missing
 * fragment reads the heads again: when a compaction moved them (and may have
 * deleted that fragment), it starts over. A type stream's offsets are then
 * looked up in the account's stream (each page once); type pages written
 * before offsets hold the events themselves.
 */
export async function readStream(pages: PagesCollection, q: { accountId: string; partition: number; type: EventType | null }, after: bigint | null, upTo: bigint, limit: number, cache?: PageCache): Promise<EventDoc[]> {
  if (limit <= 0 || (after !== null && after >= upTo)) return [];
  const from = after === null ? -Infinity : Number(after);
  const high = Number(upTo);
  const account = new StreamView(pages, streamId(q.accountId, q.partition, null), cache);
  const typed = q.type === null ? null : new StreamView(pages, streamId(q.accountId, q.partition, q.type), cache);
  const open = async (again = false): Promise<boolean> => {
    const moved = await account.open();
    // Read again after a read that ended at a missing fragment: the type head too only when a compaction moved the account's.
    if (typed && (!again || moved)) {
      await typed.open();
      // A type head of an earlier topic of this name (the account's head was written anew since): nothing of it is read.
      if (typed.head?.topic_id !== undefined && account.head?.topic_id !== undefined && typed.head.topic_id !== account.head.topic_id) typed.head = null;
    }
    return moved;
  };
  await open();
  let entries: Entry[] = [];
  for (let attempt = 0; ; attempt++) {
    entries = [];
    let low = from;
    const take = (e: Entry): boolean => {
      if (e.offset <= low) return true;
      if (e.offset > high || entries.length >= limit) return false;
      entries.push(e);
      low = e.offset;
      return true;
    };
    if (!(await (typed ?? account).eachPageEntry(from, () => entries.length >= limit, take))) break;
    let stopped = false;
    for (const e of await account.fragments(high)) {
      if (typed && (e as EventDoc).type !== q.type) continue;
      if (!take(e)) {
        stopped = true;
        break;
      }
    }
    if (stopped || attempt >= 3 || !(await open(true))) break;
  }
  if (entries.every(isEvent)) return entries;
  const found = await account.at(entries.filter((e) => !isEvent(e)).map((e) => e.offset));
  const out: EventDoc[] = [];
  for (const e of entries) {
    const doc = isEvent(e) ? e : found.get(e.offset);
    if (doc) out.push(doc);
  }
  return out;
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
