/**
 * The account streams: history addressed by `_id` only. FerretDB pushes down
 * nothing but `_id` equality (an `_id` range with sort and limit, or an `_id`
 * $in, scans the whole collection), so each account's events on its partition
 * are also kept as numbered pages: `<stream>:<n>` holds a run of consecutive
 * events of the stream (oldest first, at most PAGE_EVENTS of them and about
 * PAGE_BYTES), and the head `<stream>:h` lists the first offset of every page.
 * A stream is all the account's events, or those of one type (so a rare type
 * is read from its own stream, never by scanning the account's history).
 * A read of `limit` events is one head lookup and about limit / PAGE_EVENTS + 1
 * page lookups, whatever the size of the store.
 *
 * Written by the materializer, the single writer of a partition, after the
 * events and before the watermark. Idempotent by offset: an event at or below
 * the last offset a page holds is already there, so a batch delivered again
 * after a crash or a rebalance adds nothing. Where a page ends depends only on
 * the events of the stream (count and bytes), not on how the log was chunked,
 * so a rewrite builds the same pages. Pages are written before the head that
 * lists them. Every write is a replace filtered by `_id` alone: FerretDB
 * pushes a filter down to SQL only when it is exactly `{_id}` (any other
 * field, even beside `_id`, scans the collection on every write).
 * Consequence: a page is not protected against a late write of a writer that
 * lost the partition mid-chunk (one writer per partition is the consumer
 * group's, checked before every chunk; see docs/architecture.md).
 */
import { BSON, type Collection } from 'mongodb';
import type { EventType } from '../../../shared/src/eventlog/types.js';
import type { EventDoc, EventPageDoc, EventPageHeadDoc } from '../../../shared/src/mongo/documents.js';

export type PagesCollection = Collection<EventPageDoc | EventPageHeadDoc>;
type PageWrite = EventPageDoc | EventPageHeadDoc;

/** Events per page: a page of 100 spans at most two pages. */
export const PAGE_EVENTS = 100;
/** Bytes of events per page (BSON); a bigger event gets a page of its own (16 MB is the document limit). */
export const PAGE_BYTES = 512 * 1024;

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

/** What the writer knows of a stream: where its pages start and the newest page. */
interface StreamState {
  starts: number[];
  /** The newest page (null: the stream has none yet). */
  page: EventPageDoc | null;
}

/** Streams whose state the writer keeps between chunks (each holds at most one page). */
const CACHED_STREAMS = 2000;

export interface PageWriterOptions {
  pageEvents?: number;
  pageBytes?: number;
  /** Test hook, called after the pages of a chunk are written and before the heads: 'crash' stops there. */
  afterPages?: () => 'crash' | void;
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
  private readonly pageEvents: number;
  private readonly pageBytes: number;

  constructor(
    private readonly pages: PagesCollection,
    private readonly opts: PageWriterOptions = {},
  ) {
    this.pageEvents = opts.pageEvents ?? PAGE_EVENTS;
    this.pageBytes = opts.pageBytes ?? PAGE_BYTES;
  }

  /**
   * Writes the events of a chunk of `partition` (offsets firstOffset..lastOffset
   * of the log, in order) into their streams. Returns false when the test
   * hook stopped it.
   */
  async write(partition: number, docs: readonly EventDoc[], firstOffset: bigint, lastOffset: bigint): Promise<boolean> {
    if (this.nextOffset.get(partition) !== firstOffset) this.forget(partition);
    this.nextOffset.delete(partition);
    try {
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
      for (const [stream, events] of byStream) {
        const state = await this.load(stream);
        const next = this.append(stream, state, events, pageWrites);
        if (next.starts.length !== state.starts.length) {
          const head: EventPageHeadDoc = { _id: headId(stream), starts: next.starts };
          headWrites.push(head);
        }
        updated.push([stream, next]);
      }
      await this.bulk(pageWrites);
      if (this.opts.afterPages?.() === 'crash') {
        this.forget(partition);
        return false;
      }
      await this.bulk(headWrites);
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
    const starts = [...state.starts];
    let page = state.page;
    const changed = new Map<number, EventPageDoc>();
    for (const doc of events) {
      if (page && doc.offset <= page.last) continue;
      const size = BSON.calculateObjectSize(doc);
      if (!page || page.events.length >= this.pageEvents || (page.events.length > 0 && page.bytes + size > this.pageBytes)) {
        starts.push(doc.offset);
        page = { _id: pageId(stream, starts.length - 1), first: doc.offset, last: doc.offset, bytes: 0, events: [] };
      } else if (changed.get(starts.length - 1) !== page) {
        page = { ...page, events: [...page.events] }; // the kept state stays as stored until the writes succeed
      }
      page.events.push(doc);
      page.last = doc.offset;
      page.bytes += size;
      changed.set(starts.length - 1, page);
    }
    for (const p of changed.values()) {
      writes.push(p);
    }
    return { starts, page };
  }

  /** The stream's state: kept from the last chunk, or read (head, then its newest page) by `_id`. */
  private async load(stream: string): Promise<StreamState> {
    const kept = this.states.get(stream);
    if (kept) return kept;
    const head = (await this.pages.findOne({ _id: headId(stream) })) as EventPageHeadDoc | null;
    const starts = head?.starts ?? [];
    if (starts.length === 0) return { starts, page: null };
    const page = (await this.pages.findOne({ _id: pageId(stream, starts.length - 1) })) as EventPageDoc | null;
    // A head is written only after its pages, so its newest page is there; an empty one stands in if not.
    return { starts, page: page ?? { _id: pageId(stream, starts.length - 1), first: starts.at(-1)!, last: -1, bytes: 0, events: [] } };
  }

  /**
   * Each a replace by `_id` (idempotent), one after the other: an unordered
   * bulkWrite of many upserts left a database of FerretDB 1.24 (SQLite)
   * hanging in our tests (every later read of it waited for ever).
   */
  private async bulk(writes: PageWrite[]): Promise<void> {
    for (const w of writes) await this.pages.replaceOne({ _id: w._id }, w, { upsert: true });
  }

  private remember(stream: string, state: StreamState): void {
    this.states.delete(stream);
    this.states.set(stream, state);
    if (this.states.size > CACHED_STREAMS) this.states.delete(this.states.keys().next().value as string);
  }

  private forget(partition: number): void {
    this.nextOffset.delete(partition);
    for (const stream of this.states.keys()) if (partitionOf(stream) === partition) this.states.delete(stream);
  }
}

function partitionOf(stream: string): number {
  return Number(stream.split(':')[1]);
}

/**
 * Events of a stream with offsets in (after, upTo], oldest first, at most
 * `limit`: the head, then the page holding the first offset after `after`
 * and the ones following it, each by `_id`. `after` null: from the oldest.
 */
export async function readStream(pages: PagesCollection, stream: string, after: bigint | null, upTo: bigint, limit: number): Promise<EventDoc[]> {
  if (limit <= 0 || (after !== null && after >= upTo)) return [];
  const head = (await pages.findOne({ _id: headId(stream) })) as EventPageHeadDoc | null;
  const starts = head?.starts ?? [];
  const out: EventDoc[] = [];
  const low = after === null ? -Infinity : Number(after);
  const high = Number(upTo);
  for (let n = Math.max(0, lastAtOrBelow(starts, low)); n < starts.length && out.length < limit; n++) {
    if ((starts[n] as number) > high) break;
    const page = (await pages.findOne({ _id: pageId(stream, n) })) as EventPageDoc | null;
    if (!page) break; // listed but not there: never the case (pages are written before their head); stop rather than skip
    for (const doc of page.events) {
      if (doc.offset <= low) continue;
      if (doc.offset > high || out.length >= limit) return out;
      out.push(doc);
    }
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
