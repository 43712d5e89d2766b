/**
 * Per-subscription rate limits (`rate_limit` deliveries per second): a token
 * bucket per limited subscription, in this process. The dispatcher takes a
 * subscription's next delivery only when its bucket has a token
 * (fair-queue.ts skips it otherwise), so what is over the limit waits in
 * that subscription's queue, in order, while other subscriptions' deliveries
 * go on; a timer wakes the dispatcher when the next token is due.
 *
 * The bucket holds at most a tenth of a second's worth (and at least one
 * token): sends are spaced by 1/rate, with bursts of rate/10 at most after a
 * pause. Each delivery process keeps its own buckets: fresh events of one
 * account come from one partition (one process), retries may be sent by any
 * (docs/decisions.md states the bound).
 */

/** Bursts of at most this many seconds' worth of tokens (at least one token). */
const BURST_S = 0.1;

/** Seconds' worth of deliveries a limited subscription may have waiting here (the rest waits in the store). */
export const LIMITED_ROOM_S = 5;

const MAX_TRACKED = 100_000;

interface Bucket {
  rate: number;
  tokens: number;
  at: number;
}

const burstOf = (rate: number): number => Math.max(1, rate * BURST_S);

export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();

  constructor(private readonly now: () => number = Date.now) {}

  /** The subscription's limit as last read (null or undefined: unlimited). */
  set(key: string, rate: number | null | undefined): void {
    if (!rate || rate <= 0) {
      this.buckets.delete(key);
      return;
    }
    const b = this.buckets.get(key);
    if (b) {
      if (b.rate === rate) return;
      this.refill(b);
      b.rate = rate;
      b.tokens = Math.min(b.tokens, burstOf(rate));
      return;
    }
    if (this.buckets.size >= MAX_TRACKED) this.forgetFull();
    this.buckets.set(key, { rate, tokens: burstOf(rate), at: this.now() });
  }

  /** The limit of `key`, or null when unlimited (or not known here). */
  rateOf(key: string): number | null {
    return this.buckets.get(key)?.rate ?? null;
  }

  /** Milliseconds until `key` may send its next delivery (0: now). */
  waitOf(key: string): number {
    const b = this.buckets.get(key);
    if (!b) return 0;
    this.refill(b);
    return b.tokens >= 1 ? 0 : Math.max(1, Math.ceil(((1 - b.tokens) * 1000) / b.rate));
  }

  /** One delivery of `key` goes now. */
  take(key: string): void {
    const b = this.buckets.get(key);
    if (b) b.tokens -= 1;
  }

  private refill(b: Bucket): void {
    const now = this.now();
    b.tokens = Math.min(burstOf(b.rate), b.tokens + ((now - b.at) * b.rate) / 1000);
    b.at = now;
  }

  /** A full bucket is what a new one would be: forgetting it changes nothing. */
  private forgetFull(): void {
    for (const [key, b] of this.buckets) {
      this.refill(b);
      if (b.tokens >= burstOf(b.rate)) this.buckets.delete(key);
    }
  }
}
