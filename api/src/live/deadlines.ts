/**
 * Deadlines of many held readers on few timers. A deadline is rounded up to
 * the next multiple of the wheel's resolution, and every reader of one such
 * bucket shares its timer: 10,000 long-polls opened within a few seconds
 * hold a few hundred timers, not 10,000 timers and their closures.
 */

/** Something that ends at its deadline. */
export interface Expiring {
  expire(): void;
}

interface Bucket {
  items: Set<Expiring>;
  timer: NodeJS.Timeout;
}

export class DeadlineWheel {
  private readonly buckets = new Map<number, Bucket>();
  private count = 0;

  /** @param resolutionMs how late past its deadline an item may expire (never early). */
  constructor(private readonly resolutionMs: number) {}

  /**
   * Expires `item` at `deadline` (epoch ms) or up to one resolution later.
   * Returns the bucket it joined: pass it back to `remove`.
   */
  add(item: Expiring, deadline: number): number {
    const at = Math.ceil(deadline / this.resolutionMs) * this.resolutionMs;
    let bucket = this.buckets.get(at);
    if (!bucket) {
      bucket = { items: new Set(), timer: setTimeout(this.fire, Math.max(0, at - Date.now()), at) };
      this.buckets.set(at, bucket);
    }
    if (!bucket.items.has(item)) {
      bucket.items.add(item);
      this.count += 1;
    }
    return at;
  }

  /** Forgets `item` (no-op when it has expired or was never added); the last item of a bucket takes its timer with it. */
  remove(item: Expiring, bucketAt: number): void {
    const bucket = this.buckets.get(bucketAt);
    if (!bucket?.items.delete(item)) return;
    this.count -= 1;
    if (bucket.items.size > 0) return;
    clearTimeout(bucket.timer);
    this.buckets.delete(bucketAt);
  }

  /** Items waiting for their deadline. */
  get size(): number {
    return this.count;
  }

  /** Timers running (one per bucket in use). */
  get timers(): number {
    return this.buckets.size;
  }

  private readonly fire = (at: number): void => {
    const bucket = this.buckets.get(at);
    if (!bucket) return;
    this.buckets.delete(at);
    this.count -= bucket.items.size;
    for (const item of bucket.items) item.expire();
  };
}
