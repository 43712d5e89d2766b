/**
 * Admission: which waiting delivery takes the next free slot. Pure state, no
 * timers and no I/O, on an injected clock: the dispatcher asks it for the
 * next job and tells it how each attempt went.
 *
 * - Fair queue (fair-queue.ts): slots are shared out per subscription
 *   (round-robin, capped per subscription), so one dead receiver with a
 *   backlog cannot take them all; an attempt that times out or cannot
 *   connect halves its subscription's cap, any other raises it by one.
 * - Slow start: a subscription seen for the first time runs SLOW_START
 *   attempts at once, one more per attempt that goes well.
 * - Rate limit (rate-limit.ts): a rate-limited subscription without a token
 *   is passed over (its deliveries wait, in order) and its waiting room holds
 *   LIMITED_ROOM_S seconds of its rate at most.
 */
import { FairQueue } from './fair-queue.js';
import { LIMITED_ROOM_S, RateLimiter } from './rate-limit.js';

/** Attempts in flight at once to a subscription seen for the first time; one more per attempt that goes well. */
export const SLOW_START = 4;

/** Outcomes of attempts that held their slot for the whole timeout or never reached the receiver. */
const SLOW_OUTCOMES = new Set(['timeout', 'connect']);

/** How many subscriptions' last activity is remembered before an idle moment forgets them all. */
const MAX_ACTIVITY = 10_000;

export interface AdmissionLimits {
  /** Attempts in flight in this process. */
  concurrency: number;
  /** Attempts in flight to one subscription. */
  perSubscription: number;
}

/** What `next` hands out: the item, its subscription, and whether it took a rate-limit token already. */
export type Admitted<T> = { item: T; key: string; gated: boolean };

export class Admission<T> {
  private readonly queue: FairQueue<T>;
  private readonly limiter: RateLimiter;
  /** Items holding a slot (sending). */
  private running = 0;
  /** When an attempt of each subscription last started or finished. */
  private readonly activity = new Map<string, number>();

  constructor(
    private readonly limits: AdmissionLimits,
    private readonly now: () => number = Date.now,
  ) {
    this.queue = new FairQueue<T>(limits.perSubscription, limits.perSubscription * 4, Math.min(SLOW_START, limits.perSubscription));
    this.limiter = new RateLimiter(now);
  }

  /** Items waiting for a slot. */
  get waiting(): number {
    return this.queue.size;
  }

  /** Items holding a slot. */
  get inFlight(): number {
    return this.running;
  }

  /** Slots free now. */
  get freeSlots(): number {
    return Math.max(0, this.limits.concurrency - this.running - this.queue.size);
  }

  /** The subscription's `rate_limit` as last read (null or undefined: unlimited). */
  setRate(key: string, rate: number | null | undefined): void {
    this.limiter.set(key, rate);
  }

  /** False when the subscription's waiting room is full (the caller hands the item back). */
  push(key: string, item: T): boolean {
    return this.queue.push(key, item);
  }

  /**
   * The next item that may take a slot, its rate-limit token taken if its
   * subscription is limited; else null and, when only rate-limited items
   * wait for a token, in how many ms the first is due (`wakeIn`).
   */
  next(): { admitted: Admitted<T> | null; wakeIn: number | null } {
    if (this.running >= this.limits.concurrency) return { admitted: null, wakeIn: null };
    let tokenDue = Infinity;
    const next = this.queue.take((key) => {
      const wait = this.limiter.waitOf(key);
      if (wait > 0) tokenDue = Math.min(tokenDue, wait);
      return wait === 0;
    });
    if (!next) return { admitted: null, wakeIn: tokenDue === Infinity ? null : tokenDue };
    const { key, item } = next;
    // Its token, taken now; an item of a subscription whose limit is not known here yet waits for one after the read.
    const gated = this.limiter.rateOf(key) !== null;
    if (gated) this.limiter.take(key);
    this.running++;
    this.activity.set(key, this.now());
    return { admitted: { item, key, gated }, wakeIn: null };
  }

  /**
   * After the pre-send read of an item not `gated` when taken: ms to wait
   * for its token under the limit as now read (0: go now, token taken).
   */
  tokenAfterRead(key: string, rate: number | null | undefined, gated: boolean): number {
    this.limiter.set(key, rate);
    if (gated || this.limiter.rateOf(key) === null) return 0;
    const wait = this.limiter.waitOf(key);
    if (wait === 0) this.limiter.take(key);
    return wait;
  }

  /**
   * How an attempt of `key` went (its outcome): adapts the subscription's
   * cap, and returns the items beyond its waiting room when the cap was cut.
   */
  observe(key: string, outcome: string): T[] {
    const slow = SLOW_OUTCOMES.has(outcome);
    this.queue.observe(key, slow);
    this.activity.set(key, this.now());
    return slow ? this.queue.trim(key) : [];
  }

  /** An item of `key` gave its slot back. */
  release(key: string): void {
    this.running--;
    this.queue.done(key);
    if (this.activity.size > MAX_ACTIVITY && this.running === 0 && this.queue.size === 0) this.activity.clear();
  }

  /** Removes and returns everything waiting. */
  drain(): T[] {
    return this.queue.drain();
  }

  /** True when `key` has attempts running and none started or finished for `ms`. */
  isStalled(key: string, ms: number): boolean {
    if (this.queue.runningOf(key) === 0) return false;
    return this.now() - (this.activity.get(key) ?? 0) >= ms;
  }

  /** True when the subscription's cap was cut (its attempts hang or cannot connect). */
  isSlowed(key: string): boolean {
    return this.queue.capOf(key) < this.limits.perSubscription;
  }

  /** How many more items of `key` may wait: its waiting room, LIMITED_ROOM_S seconds of its rate at most. */
  roomFor(key: string): number {
    const room = this.queue.roomOf(key);
    const rate = this.limiter.rateOf(key);
    if (rate === null) return room;
    return Math.min(room, Math.max(0, Math.max(1, Math.ceil(rate * LIMITED_ROOM_S)) - this.queue.queuedOf(key)));
  }

  /** About how many items of `key` are taken per second: its rate limit, or else its waiting room. */
  paceOf(key: string): number {
    const rate = this.limiter.rateOf(key);
    return rate === null ? this.queue.queueLimitOf(key) : Math.max(1, Math.ceil(rate));
  }

  /** True when `key` has a rate limit (as last read here). */
  isLimited(key: string): boolean {
    return this.limiter.rateOf(key) !== null;
  }
}
