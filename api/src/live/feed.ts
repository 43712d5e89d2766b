/**
 * One reader's view of an account's events: what it missed since its cursor,
 * read from the tail window when it covers the cursor, else from MongoDB,
 * then live events from the fan-out, with no gap and no duplicate (docs/architecture.md "The event log", the resume handoff). Transport-free:
 * long-poll and SSE both read through a Feed, and the unit tests drive it
 * with in-memory stand-ins.
 */
import { encodeCursor, type Position } from '#shared/cursor.js';
import { unavailable } from '#shared/errors/index.js';
import type { EventType } from '#shared/eventlog/types.js';
import { Waiter, type CloseReason, type LiveEvent, type QueueLimit, type WaiterListener, type WaiterRegistry } from './waiters.js';
import type { RangeQuery } from '../event-store/types.js';

export type { RangeQuery };

/** What a Feed needs from the process: the fan-out, the materializer's progress and the store. */
export interface FeedPorts {
  registry: WaiterRegistry;
  /** The fan-out position P of a partition: the next offset it has not yet dispatched. */
  position(partition: number): bigint;
  partitionOf(accountId: string): number;
  /** Resolves true once the partition's materialized offset is at least `offset`, false after `timeoutMs`. */
  waitForWatermark(partition: number, offset: bigint, timeoutMs: number): Promise<boolean>;
  /** Stored events of the range, oldest first. */
  readRange(query: RangeQuery): Promise<LiveEvent[]>;
  /**
   * True when the fan-out has seen every offset of the partition after
   * `after` (up to P) and none was the account's: the catch-up read can be
   * skipped. False when it cannot tell.
   */
  nothingAfter(partition: number, accountId: string, after: bigint): boolean;
  /**
   * The range from this process's tail window (synchronously, one moment's
   * window), or null when the window does not hold every event of it.
   */
  readWindow?(query: RangeQuery): LiveEvent[] | null;
  /** True when this process's tail window holds every event of the partition in (after, before). */
  windowCovers?(partition: number, after: bigint, before: bigint): boolean;
  handoffTimeoutMs: number;
  /** Resolves once the fan-out moves (it may be dormant: see fanout.ts); awaited before registering. */
  awake?(): Promise<void>;
}

interface FeedOptions {
  accountId: string;
  types: readonly EventType[] | null;
  /** Resume strictly after this position (already checked to be in the account's partition). */
  since: Position | null;
  /** Events per MongoDB read while catching up. */
  pageSize: number;
  /** Live events a slow reader may have queued before its feed is closed. */
  maxQueue: QueueLimit;
}

export class Feed {
  private replayAfter: bigint;
  private replayDone: boolean;
  private buffer: LiveEvent[] = [];
  /** MongoDB is known to hold everything below replayBefore (the watermark reached it). */
  private storeReady = false;

  constructor(
    private readonly ports: FeedPorts,
    private readonly opts: FeedOptions,
    private readonly waiter: Waiter,
    readonly partition: number,
    /** Replay covers offsets below this (the fan-out position at registration). */
    private readonly replayBefore: bigint,
    /** The fan-out vouches that the account has nothing in (since, replayBefore). */
    missedNothing = false,
  ) {
    this.replayAfter = opts.since?.offset ?? replayBefore;
    this.replayDone = missedNothing || this.replayAfter >= replayBefore - 1n;
  }

  /**
   * The next event: stored ones first, then live; null on timeout, abort or close.
   * Not an async function: a reader waiting for a live event holds only the
   * waiter's promise, not a suspended frame of this too.
   */
  next(timeoutMs: number, signal?: AbortSignal): Promise<LiveEvent | null> {
    if (!this.replayDone && this.buffer.length === 0) return this.readPage().then(() => this.afterReplayRead(timeoutMs, signal));
    return this.afterReplayRead(timeoutMs, signal);
  }

  private afterReplayRead(timeoutMs: number, signal?: AbortSignal): Promise<LiveEvent | null> {
    const stored = this.buffer.shift();
    if (stored) return Promise.resolve(stored);
    return this.waiter.next(timeoutMs, signal);
  }

  get closedBy(): CloseReason | null {
    return this.waiter.closedBy;
  }

  /**
   * Reads what the catch-up still owes (may throw 503, like `next`), then takes
   * the next event if one is there now; null when the reader would have to
   * wait (or the feed has closed). A long-poll that gets null parks on
   * `listen` instead of holding a promise (features/events/long-poll.ts).
   */
  async takeReady(): Promise<LiveEvent | null> {
    if (!this.replayDone && this.buffer.length === 0) await this.readPage();
    return this.takeNow();
  }

  /** The next event without waiting or reading the store: a stored one still buffered, else a queued live one. */
  takeNow(): LiveEvent | null {
    return this.buffer.shift() ?? this.waiter.take();
  }

  /** An event can be taken now, or the feed has closed: a reader would not wait. */
  get settled(): boolean {
    return this.buffer.length > 0 || !this.waiter.idle;
  }

  /** See Waiter.listen: told when a live event is queued or the feed closes. */
  listen(listener: WaiterListener | null): void {
    this.waiter.listen(listener);
  }

  /**
   * A cursor up to which the reader has everything this feed will ever give
   * it (for a long-poll that timed out and loops, and an SSE resume point),
   * or null when nothing is known yet (an empty partition). Never past an
   * event the reader has not taken: while stored events are still to be
   * read, it is the last one handed over; once live, the fan-out position
   * only while the waiter is open with nothing queued (every event dispatched
   * so far reached it); a closed waiter (shutdown, overflow) saw nothing
   * after it closed, so only what it delivered counts.
   */
  checkedCursor(): string | null {
    let offset: bigint;
    const pending = this.buffer[0];
    if (pending) offset = pending.position.offset - 1n;
    else if (!this.replayDone) offset = this.replayAfter;
    else if (this.waiter.idle) {
      const live = this.ports.position(this.partition) - 1n;
      offset = live > this.waiter.deliveredThrough ? live : this.waiter.deliveredThrough;
    } else offset = this.waiter.deliveredThrough;
    return offset >= 0n ? encodeCursor({ partition: this.partition, offset }) : null;
  }

  close(): void {
    this.waiter.close('closed');
    this.ports.registry.remove(this.waiter);
  }

  /** MongoDB holds everything the replay reads (openFeed waited for the watermark). */
  markStoreReady(): void {
    this.storeReady = true;
  }

  /**
   * The next page of (replayAfter, replayBefore): from the tail window when it
   * still covers the range, else from MongoDB once the watermark has reached
   * replayBefore - 1 (a window that evicted past the cursor meanwhile sends
   * the rest of the replay to the store, which may then answer 503).
   */
  private async readPage(): Promise<void> {
    const query = {
      accountId: this.opts.accountId,
      partition: this.partition,
      after: this.replayAfter,
      before: this.replayBefore,
      types: this.opts.types,
      limit: this.opts.pageSize,
    };
    let page = this.ports.readWindow?.(query) ?? null;
    if (!page) {
      if (!this.storeReady) {
        if (!(await this.ports.waitForWatermark(this.partition, this.replayBefore - 1n, this.ports.handoffTimeoutMs))) throw unavailable('Event history', 2);
        this.storeReady = true;
      }
      page = await this.ports.readRange(query);
    }
    if (page.length < this.opts.pageSize) this.replayDone = true;
    const last = page.at(-1);
    if (last) this.replayAfter = last.position.offset;
    this.buffer = page;
  }
}

/**
 * Registers for live events first, then notes the fan-out position P of the
 * partition in the same tick (no event can be dispatched in between), waits
 * until MongoDB holds everything below P, and returns a feed that reads
 * (since, P) from MongoDB before live events above max(since, P - 1).
 * When this process's tail window holds every event of (since, P), the
 * replay reads the window instead: no wait for the materializer, no MongoDB.
 * When the fan-out saw every offset in (since, P) and none was the account's
 * (a reader back right after its last event), there is nothing to read and
 * nothing to wait for. Throws 503 rather than serve a gap when the
 * materializer is behind.
 */
export async function openFeed(ports: FeedPorts, opts: FeedOptions): Promise<Feed> {
  // A dormant fan-out moves P past events nobody here waited for when it wakes: register only after that.
  if (ports.awake) {
    try {
      await ports.awake();
    } catch {
      throw unavailable('Event history', 2); // Kafka did not give the end offsets: try again shortly
    }
  }
  const partition = opts.since?.partition ?? ports.partitionOf(opts.accountId);
  const registeredAt = ports.position(partition);
  const last = registeredAt - 1n;
  const floor = opts.since && opts.since.offset > last ? opts.since.offset : last;
  const waiter = new Waiter(opts.accountId, opts.types ? new Set(opts.types) : null, floor, opts.maxQueue);
  ports.registry.add(waiter);
  const behind = opts.since !== null && opts.since.offset < last;
  const missedNothing = behind && ports.nothingAfter(partition, opts.accountId, opts.since!.offset);
  const feed = new Feed(ports, opts, waiter, partition, registeredAt, missedNothing);
  const fromWindow = behind && !missedNothing && ports.readWindow !== undefined && ports.windowCovers?.(partition, opts.since!.offset, registeredAt) === true;
  if (behind && !missedNothing && !fromWindow) {
    let caughtUp = false;
    try {
      caughtUp = await ports.waitForWatermark(partition, last, ports.handoffTimeoutMs);
    } finally {
      if (!caughtUp) feed.close();
    }
    if (!caughtUp) throw unavailable('Event history', 2);
    feed.markStoreReady();
  }
  return feed;
}
