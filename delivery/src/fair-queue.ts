/**
 * Work queued per key (a subscription), taken round-robin, with a cap on how
 * many items of one key run at once and how many may wait. A receiver that
 * hangs can therefore tie up at most its own share of the process's slots,
 * and a busy subscription cannot starve a quiet one.
 *
 * The running cap adapts per key (additive increase, multiplicative
 * decrease): every attempt that holds its slot until a timeout or fails to
 * connect halves the key's cap (down to 1), every other finished attempt
 * raises it by one (up to the configured cap). A hung receiver so keeps one
 * slot, not 32: with 20% of the subscriptions hanging, they would otherwise
 * hold all of the process's slots between them.
 *
 * The waiting room follows the same cap (perKeyQueued / perKeyRunning items
 * per running slot): a hung receiver at cap 1 keeps 4 items in memory, not
 * 128, and the rest of its work waits in the store (the caller hands it back)
 * instead of in memory that throttles the consumer for every subscription.
 *
 * A key seen for the first time starts slowly (`startRunning` at once, one
 * more per attempt that went well): a burst of thousands of deliveries to
 * new subscriptions otherwise opens hundreds of TLS connections in the same
 * instant, and the handshakes alone ran attempts into their timeout (the
 * store-operations test: 229 timeouts in a 2,000-delivery burst to one
 * receiver, every subscription then treated as hung). This ramp is not a
 * cut: the key is not "slowed" (its work is not sent to the store).
 */
export class FairQueue<T> {
  /** Map order is the round-robin order: a key that was served moves to the back. */
  private readonly queues = new Map<string, T[]>();
  private readonly running = new Map<string, number>();
  /** Keys whose cap is below perKeyRunning right now. */
  private readonly caps = new Map<string, number>();
  /** Keys still ramping up (slow start) and how many of theirs may run now. */
  private readonly ramps = new Map<string, number>();
  /** Keys seen (their ramp is over or under way). */
  private readonly known = new Set<string>();
  private queued = 0;

  constructor(
    private readonly perKeyRunning: number,
    private readonly perKeyQueued: number,
    private readonly startRunning = perKeyRunning,
  ) {}

  /** How many of `key` may run now: its cap, or less while it ramps up. */
  private runCapOf(key: string): number {
    return Math.min(this.capOf(key), this.ramps.get(key) ?? this.perKeyRunning);
  }

  get size(): number {
    return this.queued;
  }

  /** How many items of `key` may wait: proportional to its running cap (at least 1). */
  queueLimitOf(key: string): number {
    return Math.max(1, Math.ceil((this.perKeyQueued * this.capOf(key)) / this.perKeyRunning));
  }

  /** True while `key` may queue another item. */
  hasRoom(key: string): boolean {
    return this.roomOf(key) > 0;
  }

  /** How many more items `key` may queue now. */
  roomOf(key: string): number {
    return Math.max(0, this.queueLimitOf(key) - (this.queues.get(key)?.length ?? 0));
  }

  /** False when the key already has its fill of waiting items (the caller leaves this one for later). */
  push(key: string, item: T): boolean {
    if (!this.known.has(key)) {
      if (this.known.size > 100_000) this.known.clear();
      this.known.add(key);
      if (this.startRunning < this.perKeyRunning) this.ramps.set(key, this.startRunning);
    }
    const q = this.queues.get(key);
    if (q && q.length >= this.queueLimitOf(key)) return false;
    if (q) q.push(item);
    else this.queues.set(key, [item]);
    this.queued++;
    return true;
  }

  /**
   * The next item of the first key (in rotation) that may run another and is
   * `ready` (a rate-limited key without a token is not: its items wait, in
   * order, and the next key is served); marks it running.
   */
  take(ready?: (key: string) => boolean): { key: string; item: T } | null {
    for (const [key, q] of this.queues) {
      if ((this.running.get(key) ?? 0) >= this.runCapOf(key)) continue;
      if (ready && !ready(key)) continue;
      const item = q.shift() as T;
      this.queued--;
      this.queues.delete(key);
      if (q.length > 0) this.queues.set(key, q);
      this.running.set(key, (this.running.get(key) ?? 0) + 1);
      return { key, item };
    }
    return null;
  }

  /** Items of `key` waiting now. */
  queuedOf(key: string): number {
    return this.queues.get(key)?.length ?? 0;
  }

  /** Items of `key` running now. */
  runningOf(key: string): number {
    return this.running.get(key) ?? 0;
  }

  done(key: string): void {
    const n = (this.running.get(key) ?? 1) - 1;
    if (n <= 0) this.running.delete(key);
    else this.running.set(key, n);
  }

  /** How an attempt of `key` went: `slow` when it held its slot to a timeout or could not connect. */
  observe(key: string, slow: boolean): void {
    const ramp = this.ramps.get(key);
    if (ramp !== undefined && !slow) {
      if (ramp + 1 >= this.perKeyRunning) this.ramps.delete(key);
      else this.ramps.set(key, ramp + 1);
    }
    const cap = this.capOf(key);
    const next = slow ? Math.max(1, Math.floor(cap / 2)) : cap + 1;
    if (next >= this.perKeyRunning) this.caps.delete(key);
    else this.caps.set(key, next);
  }

  capOf(key: string): number {
    return this.caps.get(key) ?? this.perKeyRunning;
  }

  /** Removes and returns the items of `key` beyond its (possibly just lowered) queue limit, newest first. */
  trim(key: string): T[] {
    const q = this.queues.get(key);
    const limit = this.queueLimitOf(key);
    if (!q || q.length <= limit) return [];
    const extra = q.splice(limit);
    this.queued -= extra.length;
    return extra;
  }

  /** Removes and returns everything waiting. */
  drain(): T[] {
    const all = [...this.queues.values()].flat();
    this.queues.clear();
    this.queued = 0;
    return all;
  }
}
