/**
 * Live waiters of this process (long-polls and SSE streams), by account. The
 * fan-out consumer offers each event to the waiters of its account; a waiter
 * queues what matches until its reader takes it.
 */

import type { LiveEvent } from '../event-store/types.js';

export type { LiveEvent };

/** How much a waiter may hold for a reader that is not taking events. */
export interface QueueLimit {
  events: number;
  bytes: number;
}

/** Why a waiter stopped taking events: its reader left, it fell too far behind, or the process is stopping. */
export type CloseReason = 'closed' | 'overflow' | 'shutdown';

/** Told when a waiter has an event queued or closes (a parked long-poll: an object, not a closure per waiter). */
export interface WaiterListener {
  ready(): void;
}

export class Waiter {
  private readonly queue: LiveEvent[] = [];
  private queuedBytes = 0;
  private wake: (() => void) | null = null;
  private listener: WaiterListener | null = null;
  private closeReason: CloseReason | null = null;

  /**
   * @param floor only offsets above it are taken; it rises with each event taken,
   *   so an offset is never delivered twice.
   */
  constructor(
    readonly accountId: string,
    private readonly types: ReadonlySet<string> | null,
    private floor: bigint,
    private readonly limit: QueueLimit,
  ) {}

  get closedBy(): CloseReason | null {
    return this.closeReason;
  }

  /** The highest offset this waiter has accounted for (queued, taken, filtered out, or covered by its start). */
  get checkedThrough(): bigint {
    return this.floor;
  }

  /**
   * The highest offset up to which the reader has everything of this waiter:
   * every matching event at or before it was taken (none is still queued).
   * A closed waiter stops taking events, so this stops moving when it closes.
   */
  get deliveredThrough(): bigint {
    const queued = this.queue[0];
    return queued ? queued.position.offset - 1n : this.floor;
  }

  /** Open and nothing queued: every event the fan-out dispatches reaches this reader next. */
  get idle(): boolean {
    return this.closeReason === null && this.queue.length === 0;
  }

  offer(event: LiveEvent): void {
    if (this.closeReason || event.position.offset <= this.floor) return;
    if (this.types && !this.types.has(event.record.type)) {
      this.floor = event.position.offset;
      return;
    }
    const size = event.size ?? 0;
    if (this.queue.length >= this.limit.events || this.queuedBytes + size > this.limit.bytes) {
      // A reader this far behind resumes from its cursor instead (SSE reconnects with Last-Event-ID).
      // The floor stays below the event it could not take, so the resume point never passes it.
      this.close('overflow');
      return;
    }
    this.floor = event.position.offset;
    this.queue.push(event);
    this.queuedBytes += size;
    this.signal();
  }

  close(reason: CloseReason): void {
    if (this.closeReason) return;
    this.closeReason = reason;
    this.signal();
  }

  /** The next queued event; null after `timeoutMs`, on abort, or once closed and drained. */
  next(timeoutMs: number, signal?: AbortSignal): Promise<LiveEvent | null> {
    const ready = this.take();
    if (ready) return Promise.resolve(ready);
    if (this.closeReason || signal?.aborted || timeoutMs <= 0) return Promise.resolve(null);
    return new Promise((resolve) => {
      const finish = (): void => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', finish);
        this.wake = null;
        resolve(this.take());
      };
      const timer = setTimeout(finish, timeoutMs);
      signal?.addEventListener('abort', finish, { once: true });
      this.wake = finish;
    });
  }

  /** Calls `listener.ready()` whenever an event is queued or the waiter closes, until set to null. */
  listen(listener: WaiterListener | null): void {
    this.listener = listener;
  }

  /** The next queued event, or null: never waits. */
  take(): LiveEvent | null {
    const event = this.queue.shift();
    if (!event) return null;
    this.queuedBytes -= event.size ?? 0;
    return event;
  }

  private signal(): void {
    this.wake?.();
    this.listener?.ready();
  }
}

export class WaiterRegistry {
  private readonly byAccount = new Map<string, Set<Waiter>>();
  private total = 0;
  private stopping = false;

  add(waiter: Waiter): void {
    if (this.stopping) waiter.close('shutdown');
    let set = this.byAccount.get(waiter.accountId);
    if (!set) this.byAccount.set(waiter.accountId, (set = new Set()));
    if (!set.has(waiter)) {
      set.add(waiter);
      this.total += 1;
    }
  }

  remove(waiter: Waiter): void {
    const set = this.byAccount.get(waiter.accountId);
    if (!set?.delete(waiter)) return;
    this.total -= 1;
    if (set.size === 0) this.byAccount.delete(waiter.accountId);
  }

  hasAccount(accountId: string): boolean {
    return this.byAccount.has(accountId);
  }

  /** Offers `event` to every waiter of the account; how many that was. */
  dispatch(accountId: string, event: LiveEvent): number {
    const set = this.byAccount.get(accountId);
    if (!set) return 0;
    for (const waiter of set) waiter.offer(event);
    return set.size;
  }

  /** Waiters registered right now, over all accounts. */
  get size(): number {
    return this.total;
  }

  get accounts(): number {
    return this.byAccount.size;
  }

  /** Shutdown: every waiter ends now, and any registered later ends at once. */
  closeAll(reason: CloseReason): void {
    this.stopping = true;
    for (const set of this.byAccount.values()) for (const waiter of set) waiter.close(reason);
  }
}
