/**
 * What the retry scheduler (retry-scheduler.ts) does with the entries of a
 * bucket it reads: which to claim, which are held here, which to defer or
 * move to a later bucket, and which ordered queues to step. Pure: no store.
 */
import type { DeliveryDoc, DueEntry } from '#shared/mongo/index.js';
import { FIFO_POKE_PREFIX } from '#shared/mongo/delivery-queue.js';
import type { Dispatcher } from './dispatch.js';

/** An entry whose subscription has no room here is looked at again this much later. */
export const DEFER_MS = 1000;

export interface OpenBucket {
  b: number;
  entries: DueEntry[];
  /** Entries before this one are handed out. */
  i: number;
  /** Entries deferred per subscription so far from this bucket (their spread). */
  deferred: Map<string, number>;
}

/**
 * The open bucket's next entries, up to `limit` to take: those to claim,
 * those held here (`ours`: never claimed here, never dropped unread),
 * those of a subscription without room (`defer`), and the ordered queues
 * to step (fifo.ts: poked, or named by one of their deliveries' entries).
 */
export function sortEntries(open: OpenBucket, limit: number, dispatcher: Pick<Dispatcher, 'holds' | 'roomFor'>): { take: DueEntry[]; ours: DueEntry[]; defer: DueEntry[]; queues: Set<string>; next: number } {
  const take: DueEntry[] = [];
  const ours: DueEntry[] = [];
  const defer: DueEntry[] = [];
  const queues = new Set<string>();
  const perSubscription = new Map<string, number>();
  let i = open.i;
  for (; i < open.entries.length && take.length < limit; i++) {
    const e = open.entries[i] as DueEntry;
    if (e.d.startsWith(FIFO_POKE_PREFIX)) {
      queues.add(e.s);
      continue;
    }
    // Ours already: looked at again later (its record, still being written, may be all that
    // bucketed it: a fresh delivery's first retry, or a lease this process renewed).
    if (dispatcher.holds(e.d)) {
      ours.push(e);
      continue;
    }
    const used = perSubscription.get(e.s) ?? 0;
    if (dispatcher.roomFor(e.s) - used <= 0) {
      defer.push(e);
      continue;
    }
    perSubscription.set(e.s, used + 1);
    take.push(e);
  }
  return { take, ours, defer, queues, next: i };
}

/**
 * What to do with each delivery read (the first `taken` were taken, the
 * rest are held here): the claims to try and their lease checks; entries
 * to move later are added to `moves`, ordered queues to `queues`.
 */
export function planDue(docs: (DeliveryDoc | null)[], taken: number, nowMs: number, leaseMs: number, moves: DueEntry[], queues: Set<string>): { claimable: DeliveryDoc[]; checks: DueEntry[] } {
  const claimable: DeliveryDoc[] = [];
  /** Lease checks of the claims about to be tried: written by each claimer. */
  const checks: DueEntry[] = [];
  for (const [k, doc] of docs.entries()) {
    if (k < taken && doc?.fifo) {
      queues.add(doc.subscription_id);
      continue;
    }
    if (!doc || doc.state !== 'pending') continue;
    const lease = doc.lease_until?.getTime() ?? 0;
    if (k >= taken) {
      // Held here: back at its lease's end, DEFER_MS ahead at least (a fresh delivery has no lease).
      if (lease <= nowMs && doc.next_attempt_at && doc.next_attempt_at.getTime() > nowMs) continue; // due later: bucketed then
      moves.push({ d: doc._id, s: doc.subscription_id, t: Math.max(lease, nowMs + DEFER_MS) });
      continue;
    }
    if (lease > nowMs) {
      moves.push({ d: doc._id, s: doc.subscription_id, t: lease });
      continue;
    }
    if (!doc.next_attempt_at || doc.next_attempt_at.getTime() > nowMs) continue;
    claimable.push(doc);
    checks.push({ d: doc._id, s: doc.subscription_id, t: nowMs + leaseMs });
  }
  return { claimable, checks };
}

/** One entry per delivery (writers may have bucketed one delivery more than once). */
export function distinct(entries: DueEntry[]): DueEntry[] {
  const seen = new Set<string>();
  return entries.filter((e) => !seen.has(e.d) && seen.add(e.d));
}

/** Processes reading the same bucket try its entries in different orders, so they collide less. */
export function shuffle<T>(items: T[]): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [items[i], items[j]] = [items[j] as T, items[i] as T];
  }
  return items;
}
