/**
 * The tail window: the most recent events of each partition, as this
 * process's fan-out dispatched them, held in memory and indexed by account,
 * so a reader whose cursor is near the head is answered without MongoDB
 * (docs/architecture.md, "Hot paths do not wait on the store's query planner").
 *
 * Invariant, per partition: every event of the partition with an offset in
 * [start, next) is in the window, and `next` is the fan-out's next offset to
 * dispatch (once the fan-out appends in order). Offsets in that range without
 * an event (not an event envelope) are known to hold nothing. So a cursor
 * `after` with start <= after + 1 <= next can be answered from memory: every
 * event after it up to the head is here.
 * - Appends come in offset order; anything else (an offset that is not
 *   `next`: a seek, a reassignment, a partition first seen, a gap filled from
 *   MongoDB) resets the window to start at that offset. It never holds a hole.
 * - Eviction takes the oldest event and raises `start` past it, so a cursor
 *   older than the window is simply not covered (the reader goes to MongoDB).
 * - Bounded by events and by bytes per partition. An event is held once: the
 *   partition's queue and the account's queue share the same object.
 * - An event no local reader was waiting for is kept as its text on the
 *   topic (appendText) and parsed only when a read reaches it (then kept
 *   parsed): most events of a busy service are never read on a given pod, and
 *   parsing each on every pod was most of what a pod without readers spent
 *   per event. The text's first two keys are checked when it is appended (its
 *   id, for the duplicate rule below, and its account, the Kafka key); a
 *   text that then fails to parse as that envelope makes the read return
 *   null (MongoDB answers instead), so a lazy entry never answers differently
 *   from the store.
 */
import { decodeEnvelopeText, toRecord } from '#shared/eventlog/envelope.js';
import type { EventType } from '#shared/eventlog/types.js';
import type { LiveEvent } from './waiters.js';

/**
 * Heap an event is charged: twice its size on the topic (the parsed record's
 * strings and objects) plus this (the entry and its two queue slots).
 * Measured: a 194-byte event holds 545 bytes of heap; charged 548. An entry
 * kept as text (one byte a character for the ASCII JSON of an envelope, plus
 * the string's header) holds less than a parsed one, and is charged the same:
 * a read may parse it at any time, and the bound must hold then too.
 */
const ENTRY_OVERHEAD_BYTES = 160;

export function chargedBytes(size: number): number {
  return 2 * size + ENTRY_OVERHEAD_BYTES;
}

interface TailLimits {
  /** Events per partition; 0 turns the window off. */
  events: number;
  /** Bytes per partition (chargedBytes of each event); 0 turns the window off. */
  bytes: number;
}

interface Entry {
  accountId: string;
  offset: bigint;
  /** The event id (the duplicate rule). */
  id: string;
  /** The parsed event; null while it is kept as `text`. */
  event: LiveEvent | null;
  /** The envelope's JSON as on the topic, until a read parses it. */
  text: string | null;
  /** Bytes of the value on the topic (LiveEvent.size). */
  size: number;
  bytes: number;
}

/** A FIFO with O(1) shift (compacts now and then). */
class Queue<T> {
  private items: T[] = [];
  private head = 0;

  get length(): number {
    return this.items.length - this.head;
  }

  push(item: T): void {
    this.items.push(item);
  }

  shift(): T | undefined {
    if (this.head >= this.items.length) return undefined;
    const item = this.items[this.head] as T;
    this.items[this.head] = undefined as T;
    this.head += 1;
    // Compacting once half the slots are spent keeps the waste at most the live size (amortized O(1)).
    if (this.head >= 16 && this.head * 2 >= this.items.length) {
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
    return item;
  }

  at(index: number): T {
    return this.items[this.head + index] as T;
  }
}

interface PartitionTail {
  /** Lowest offset covered. */
  start: bigint;
  /** Next offset expected (the fan-out position once appended): [start, next) is covered. */
  next: bigint;
  entries: Queue<Entry>;
  byAccount: Map<string, Queue<Entry>>;
  /** Event ids in the window: a second copy of one (an ingest retry re-produced after a lost ack) is passed over, as the materializer skips ids already stored. */
  ids: Set<string>;
  bytes: number;
  /** Entries still kept as text (not parsed by a read yet). */
  texts: number;
}

interface TailStats {
  partition: number;
  events: number;
  bytes: number;
  accounts: number;
  /** Events kept as their text, not parsed (no read has reached them). */
  texts: number;
  start: bigint;
  next: bigint;
}

export interface TailRead {
  accountId: string;
  partition: number;
  /** Exclusive lower bound (the reader's cursor). */
  after: bigint;
  /** Exclusive upper bound; null for "up to the head". */
  before: bigint | null;
  types: readonly EventType[] | null;
  limit: number;
}

export class TailWindow {
  private readonly partitions = new Map<number, PartitionTail>();
  /** Reads answered from memory / refused (not covered), for metrics and tests. */
  hits = 0;
  misses = 0;

  constructor(private readonly limits: TailLimits) {}

  get enabled(): boolean {
    return this.limits.events > 0 && this.limits.bytes > 0;
  }

  /** Starts the partition's window empty at `next` (nothing covered until events are appended). */
  reset(partition: number, next: bigint): void {
    if (!this.enabled) return;
    this.partitions.set(partition, { start: next, next, entries: new Queue(), byAccount: new Map(), ids: new Set(), bytes: 0, texts: 0 });
  }

  /** The fan-out dispatched `event` (at its position) of `accountId`. Out of order resets the window there. */
  append(accountId: string, event: LiveEvent): void {
    if (!this.enabled) return;
    const { partition, offset } = event.position;
    const size = event.size ?? 0;
    this.add(partition, { accountId, offset, id: event.record.id, event, text: null, size, bytes: chargedBytes(size) });
  }

  /**
   * The fan-out dispatched the envelope at `offset` of `partition` without
   * parsing it: `text` is its value, whose first keys name event `id` and
   * `accountId` (peekEnvelopeId); `size` its bytes on the topic. Parsed when
   * a read first reaches it.
   */
  appendText(partition: number, offset: bigint, accountId: string, id: string, text: string, size: number): void {
    if (!this.enabled) return;
    this.add(partition, { accountId, offset, id, event: null, text, size, bytes: chargedBytes(size) });
  }

  private add(partition: number, entry: Entry): void {
    const { offset } = entry;
    let tail = this.partitions.get(partition);
    if (!tail || tail.next !== offset) {
      this.reset(partition, offset);
      tail = this.partitions.get(partition) as PartitionTail;
    }
    if (tail.ids.has(entry.id)) {
      tail.next = offset + 1n; // covered, holding nothing: the first copy is the event
      return;
    }
    tail.ids.add(entry.id);
    const { accountId } = entry;
    if (entry.text !== null) tail.texts += 1;
    tail.entries.push(entry);
    let own = tail.byAccount.get(accountId);
    if (!own) tail.byAccount.set(accountId, (own = new Queue()));
    own.push(entry);
    tail.bytes += entry.bytes;
    tail.next = offset + 1n;
    while (tail.entries.length > 0 && (tail.entries.length > this.limits.events || tail.bytes > this.limits.bytes)) this.evict(tail);
  }

  /** The fan-out passed `offset` of `partition`, which holds no event (not an envelope). */
  skip(partition: number, offset: bigint): void {
    if (!this.enabled) return;
    const tail = this.partitions.get(partition);
    if (!tail || tail.next !== offset) this.reset(partition, offset + 1n);
    else tail.next = offset + 1n;
  }

  /** True when every event of the partition after `after` (and before `before`, or up to the head) is in the window. */
  covers(partition: number, after: bigint, before: bigint | null = null): boolean {
    const tail = this.partitions.get(partition);
    if (!tail || after + 1n < tail.start || after + 1n > tail.next) return false;
    return before === null || before <= tail.next;
  }

  /**
   * The account's events of the partition in (after, before), oldest first,
   * matching `types`, at most `limit`; null when the window does not cover
   * the range (read MongoDB instead). Synchronous: the answer is one moment's window.
   */
  read(q: TailRead): LiveEvent[] | null {
    if (!this.covers(q.partition, q.after, q.before)) {
      if (this.enabled) this.misses += 1;
      return null;
    }
    const own = (this.partitions.get(q.partition) as PartitionTail).byAccount.get(q.accountId);
    const out: LiveEvent[] = [];
    if (!own || q.limit <= 0) {
      this.hits += 1;
      return out;
    }
    // First entry after the cursor (offsets ascend).
    let lo = 0;
    let hi = own.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (own.at(mid).offset <= q.after) lo = mid + 1;
      else hi = mid;
    }
    const types = q.types && q.types.length > 0 ? q.types : null;
    for (let i = lo; i < own.length && out.length < q.limit; i++) {
      const entry = own.at(i);
      if (q.before !== null && entry.offset >= q.before) break;
      const event = entry.event ?? this.parse(entry, q.partition);
      if (!event) {
        // Not the envelope its first keys said: the window cannot vouch for this range.
        this.misses += 1;
        return null;
      }
      if (types && !types.includes(event.record.type)) continue;
      out.push(event);
    }
    this.hits += 1;
    return out;
  }

  /** Size and span of each partition's window. */
  stats(): TailStats[] {
    return [...this.partitions].map(([partition, t]) => ({ partition, events: t.entries.length, bytes: t.bytes, accounts: t.byAccount.size, texts: t.texts, start: t.start, next: t.next }));
  }

  /** The partition's covered range [start, next), or null when it has no window. */
  range(partition: number): { start: bigint; next: bigint } | null {
    const tail = this.partitions.get(partition);
    return tail ? { start: tail.start, next: tail.next } : null;
  }

  /** Parses an entry kept as text (and keeps the result); null when the text is not the envelope it was appended as. */
  private parse(entry: Entry, partition: number): LiveEvent | null {
    const envelope = entry.text === null ? null : decodeEnvelopeText(entry.text);
    if (!envelope || envelope.id !== entry.id || envelope.account_id !== entry.accountId) return null;
    const position = { partition, offset: entry.offset };
    entry.event = { position, record: toRecord(envelope, position), size: entry.size };
    entry.text = null;
    const tail = this.partitions.get(partition);
    if (tail) tail.texts -= 1;
    return entry.event;
  }

  private evict(tail: PartitionTail): void {
    const entry = tail.entries.shift() as Entry;
    tail.bytes -= entry.bytes;
    tail.ids.delete(entry.id);
    if (entry.text !== null) tail.texts -= 1;
    tail.start = entry.offset + 1n;
    const own = tail.byAccount.get(entry.accountId) as Queue<Entry>;
    own.shift(); // offsets ascend in both queues: the account's oldest is this one
    if (own.length === 0) tail.byAccount.delete(entry.accountId);
  }
}
