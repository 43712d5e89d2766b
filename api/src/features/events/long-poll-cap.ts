import { AppError } from '#shared/errors/index.js';

/**
 * Long-polls held per account in this process. The count lives in this
 * process only: behind a load balancer with k API processes an account may
 * hold up to k x the cap in all (README "Security"); what the cap bounds is
 * the memory and sockets one account can pin in one process.
 */
export class LongPollCap {
  private readonly counts = new Map<string, number>();

  constructor(private readonly cap: number) {}

  /** Takes one of the account's slots, or refuses with 429 naming the cap. Give it back with `release`, once. */
  hold(accountId: string): void {
    const now = this.counts.get(accountId) ?? 0;
    if (now >= this.cap) {
      throw new AppError('rate_limited', `Too many long-polls open for this account: at most ${this.cap} at once per API process; close one or retry shortly`, undefined, { 'Retry-After': '1' });
    }
    this.counts.set(accountId, now + 1);
  }

  /** Gives back a slot `hold` took (the caller makes sure it does so once: no closure per long-poll). */
  release(accountId: string): void {
    const left = (this.counts.get(accountId) ?? 1) - 1;
    if (left <= 0) this.counts.delete(accountId);
    else this.counts.set(accountId, left);
  }

  /** Long-polls `accountId` holds in this process. */
  held(accountId: string): number {
    return this.counts.get(accountId) ?? 0;
  }
}
