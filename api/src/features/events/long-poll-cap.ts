import { AppError } from '#shared/errors/index.js';
import type { ApiDeps } from '../../deps.js';

/** Long-polls held per account, per process (keyed by the process's deps, so test apps do not share counts). */
const held = new WeakMap<object, Map<string, number>>();

/**
 * Takes one of the account's long-poll slots in this process, or refuses
 * with 429 naming the cap. The count lives in this process only: behind a
 * load balancer with k API processes an account may hold up to k x the cap in
 * all (README "Security"); what the cap bounds is the memory and sockets one
 * account can pin in one process. Give it back with `releaseLongPoll`, once.
 */
export function holdLongPoll(deps: ApiDeps, accountId: string): void {
  const cap = deps.config.events.maxLongPollsPerAccount;
  let counts = held.get(deps.events);
  if (!counts) {
    counts = new Map();
    held.set(deps.events, counts);
  }
  const now = counts.get(accountId) ?? 0;
  if (now >= cap) {
    throw new AppError('rate_limited', `Too many long-polls open for this account: at most ${cap} at once per API process; close one or retry shortly`, undefined, { 'Retry-After': '1' });
  }
  counts.set(accountId, now + 1);
}

/** Gives back a slot `holdLongPoll` took (the caller makes sure it does so once: no closure per long-poll). */
export function releaseLongPoll(deps: ApiDeps, accountId: string): void {
  const counts = held.get(deps.events);
  if (!counts) return;
  const left = (counts.get(accountId) ?? 1) - 1;
  if (left <= 0) counts.delete(accountId);
  else counts.set(accountId, left);
}

/** Long-polls `accountId` holds in this process (tests). */
export function longPollsHeld(deps: ApiDeps, accountId: string): number {
  return held.get(deps.events)?.get(accountId) ?? 0;
}
