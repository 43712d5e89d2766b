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
 */
export class FairQueue<T> {
  /** Map order is the round-robin order: a key that was served moves to the back. */
  private readonly queues = new Map<string, T[]>();
  private readonly running = new Map<string, number>();
  /** Keys whose cap is below perKeyRunning right now. */
  private readonly caps = new Map<string, number>();
  private queued = 0;

  constructor(
    private readonly perKeyRunning: number,
    private readonly perKeyQueued: number,
  ) {}

  get size(): number {
    return this.queued;
  }

  /** False when the key already has its fill of waiting items (the caller leaves this one for later). */
  push(key: string, item: T): boolean {
    const q = this.queues.get(key);
    if (q && q.length >= this.perKeyQueued) return false;
    if (q) q.push(item);
    else this.queues.set(key, [item]);
    this.queued++;
    return true;
  }

  /** The next item of the first key (in rotation) that may run another; marks it running. */
  take(): { key: string; item: T } | null {
    for (const [key, q] of this.queues) {
      if ((this.running.get(key) ?? 0) >= this.capOf(key)) continue;
      const item = q.shift() as T;
      this.queued--;
      this.queues.delete(key);
      if (q.length > 0) this.queues.set(key, q);
      this.running.set(key, (this.running.get(key) ?? 0) + 1);
      return { key, item };
    }
    return null;
  }

  done(key: string): void {
    const n = (this.running.get(key) ?? 1) - 1;
    if (n <= 0) this.running.delete(key);
    else this.running.set(key, n);
  }

  /** How an attempt of `key` went: `slow` when it held its slot to a timeout or could not connect. */
  observe(key: string, slow: boolean): void {
    const cap = this.capOf(key);
    const next = slow ? Math.max(1, Math.floor(cap / 2)) : cap + 1;
    if (next >= this.perKeyRunning) this.caps.delete(key);
    else this.caps.set(key, next);
  }

  capOf(key: string): number {
    return this.caps.get(key) ?? this.perKeyRunning;
  }

  /** Keys running at their cap: claiming more of their work now would only make it wait. */
  busyKeys(): string[] {
    return [...this.running].filter(([key, n]) => n >= this.capOf(key)).map(([key]) => key);
  }

  /** Removes and returns everything waiting. */
  drain(): T[] {
    const all = [...this.queues.values()].flat();
    this.queues.clear();
    this.queued = 0;
    return all;
  }
}
