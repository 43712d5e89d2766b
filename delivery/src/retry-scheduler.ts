/**
 * Picks up deliveries that are due from the retry store: scheduled retries,
 * overflow handed over by the consumer, deliveries released at shutdown and
 * deliveries whose holder died (their lease ran out). Every delivery process
 * runs one; the atomic claim decides which process sends each attempt.
 *
 * Due work is found through the time buckets of delivery-queue.ts, read in
 * order by `_id` (never a query over the deliveries): each process reads
 * every bucket once it is over, from a cursor that starts where the
 * processes left off (delivery_due's `cursor` document). For each entry it
 * reads the delivery by `_id` and decides:
 * - gone, finished, or due later (whoever set the later time bucketed it): dropped;
 * - held under a live lease: put back in the bucket of that lease's end (a
 *   holder that dies is looked at again then; one that extends its lease
 *   keeps being looked at);
 * - otherwise: a lease check is bucketed at the end of the lease it is about
 *   to take, then the claim is tried. The check is stored before the claim,
 *   so a claimer that dies holding the claim is looked at again; a claim lost
 *   to another process costs a check that finds the delivery held or done.
 * An entry of a delivery this process holds (queued, sending, or its record
 * being written) is not claimed and not dropped: unless finished or due
 * later, it is put back at max(its lease's end, DEFER_MS ahead). The record
 * being written may be all that bucketed it (a fresh delivery's first retry
 * is stored with its entry while the rest of its flush runs), and a holder's
 * lease renewals bucket their own lease checks (deliveries.ts renewClaim).
 * An entry whose subscription has no room in this process is moved ahead
 * (fairness: it does not hold up the others): the subscription's i-th
 * deferred entry of the bucket to now + DEFER_MS + floor(i / pace) *
 * DEFER_MS, pace being what this process takes of it per second (its
 * rate_limit, or its waiting room: Dispatcher.paceOf), so a big backlog is
 * spread out, not read again whole every second. One that finds no room at
 * all stays where it is (the cursor waits at its bucket).
 *
 * A bucket's entries are merged by delivery when read (one delivery may be
 * bucketed more than once). Moves (deferrals, put-backs at a lease's end,
 * held entries put back) are written by each process that reads the bucket,
 * one slot per later bucket per process: P processes write at most P copies
 * of a moved entry, merged again when that bucket is read, so copies never
 * multiply from bucket to bucket. (Electing one writer per move by a marker
 * insert left a window: a writer killed between its markers and its entries
 * lost the moves, and every other process had stood back.) Lease checks are
 * written by each claimer (each may win its claim).
 *
 * A delivery of a `fifo` subscription is never claimed from its entry: the
 * entry (or a poke of the queue, `fifo:<subscription>`) steps that
 * subscription's ordered queue instead (fifo.ts), which claims only its head.
 */
import type { Logger } from '#shared/log.js';
import type { DeliveryDoc, DueEntry } from '#shared/mongo/index.js';
import { bucketOf, dueAt, DUE_BUCKET_MS, readBucket, readDueCursor, saveDueCursor, scheduleDue } from '#shared/mongo/delivery-queue.js';
import { claim, releaseLeases, type DeliveryCollections } from './deliveries.js';
import type { Dispatcher } from './dispatch.js';
import { DEFER_MS, distinct, planDue, shuffle, sortEntries, type OpenBucket } from './due-plan.js';
import { storeJob } from './jobs.js';
import { FifoQueues } from './fifo.js';

interface SchedulerDeps {
  log: Logger;
  collections: DeliveryCollections;
  dispatcher: Pick<Dispatcher, 'room' | 'holds' | 'roomFor' | 'paceOf' | 'enqueue'>;
  owner: string;
  leaseMs: number;
  intervalMs: number;
  clock: () => Date;
}

/** Claims per tick at most: one slow tick must not starve the consumer's own deliveries. */
const MAX_CLAIMS_PER_TICK = 200;
/** Buckets read per tick at most (a process catching up after downtime reads many empty ones). */
const MAX_BUCKETS_PER_TICK = 1000;
/** A first scheduler (no cursor stored yet) starts this far back: writers' in-flight batches land there. */
const FIRST_START_MS = 60_000;
/** The cursor is stored at most this often (and at stop). */
const SAVE_CURSOR_MS = 1000;
/** Deliveries read (and claimed) by `_id` at once. */
const READS_AT_ONCE = 8;

export class RetryScheduler {
  private timer: NodeJS.Timeout | null = null;
  private ticking: Promise<void> | null = null;
  private stopped = false;
  private booted = false;
  /** The next bucket to read (once booted). */
  private cursor = 0;
  private current: OpenBucket | null = null;
  private saved = -1;
  private savedAt = 0;
  /** The ordered queues of `fifo` subscriptions: stepped from their entries here, and after a finish or an append (worker.ts). */
  readonly fifo: FifoQueues;

  constructor(private readonly deps: SchedulerDeps) {
    this.fifo = new FifoQueues(deps);
  }

  start(): void {
    this.schedule();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.fifo.stop();
    if (this.timer) clearTimeout(this.timer);
    await this.ticking;
    await this.saveCursor(true).catch((err: unknown) => this.deps.log.info({ err }, 'could not store the retry cursor; the next start reads a few buckets again'));
  }

  /** One pass: read the buckets that are over and claim their due deliveries while this process has free slots. */
  async tick(): Promise<number> {
    const { deps } = this;
    if (!this.booted) {
      this.cursor = await this.boot();
      this.booted = true;
    }
    let claimed = 0;
    let buckets = 0;
    while (!this.stopped && claimed < MAX_CLAIMS_PER_TICK && deps.dispatcher.room > 0) {
      if (!this.current) {
        const b = this.cursor;
        if ((b + 1) * DUE_BUCKET_MS > deps.clock().getTime() || buckets >= MAX_BUCKETS_PER_TICK) break;
        this.current = { b, entries: shuffle(distinct(await readBucket(deps.collections.retryDue, b))), i: 0, deferred: new Map() };
        buckets++;
      }
      const open = this.current;
      if (open.i >= open.entries.length) {
        this.current = null;
        this.cursor = open.b + 1;
        continue;
      }
      claimed += await this.handOut(open, MAX_CLAIMS_PER_TICK - claimed);
    }
    await this.saveCursor(false);
    return claimed;
  }

  /** The stored cursor, or (first scheduler ever) a start a little in the past after bucketing what an earlier version stored. */
  private async boot(): Promise<number> {
    const { deps } = this;
    const stored = await readDueCursor(deps.collections.retryDue);
    if (stored !== null) {
      this.saved = stored;
      return stored;
    }
    const start = bucketOf(deps.clock().getTime() - FIRST_START_MS);
    const n = await bucketStoredDeliveries(deps.collections, deps.clock());
    if (n > 0) deps.log.info({ deliveries: n }, 'put the pending deliveries stored by an earlier version into the retry buckets');
    await saveDueCursor(deps.collections.retryDue, start);
    this.saved = start;
    return start;
  }

  /** Hands out the next entries of an open bucket, as many as there is room for; returns the claims won. */
  private async handOut(open: OpenBucket, budget: number): Promise<number> {
    const { deps } = this;
    const sorted = sortEntries(open, Math.min(budget, deps.dispatcher.room), deps.dispatcher);
    const nowMs = deps.clock().getTime();
    const docs = await readDeliveries(deps.collections, [...sorted.take, ...sorted.ours].map((e) => e.d));
    /** Entries moved to a later bucket (each reading process writes its own; merged on read). */
    const moves: DueEntry[] = sorted.defer.map((e) => ({ ...e, t: this.deferredTo(open, e.s, nowMs) }));
    const { claimable, checks } = planDue(docs, sorted.take.length, nowMs, deps.leaseMs, moves, sorted.queues);
    // Stored before any claim is tried and before the bucket moves past these entries.
    if (checks.length + moves.length > 0) await scheduleDue(deps.collections, [...checks, ...moves], nowMs);
    // Before the bucket moves past their entries: a step that fails is tried again with them.
    for (const subscriptionId of sorted.queues) await this.fifo.step(subscriptionId);
    open.i = sorted.next;
    return this.claimAll(claimable);
  }

  /** Claims each delivery and hands the ones won to the dispatcher as store jobs; returns how many were won. */
  private async claimAll(claimable: DeliveryDoc[]): Promise<number> {
    const { deps } = this;
    let won = 0;
    const full: string[] = [];
    for (let k = 0; k < claimable.length; k += READS_AT_ONCE) {
      await Promise.all(
        claimable.slice(k, k + READS_AT_ONCE).map(async (seen) => {
          const held = await claim(deps.collections, seen, deps.owner, deps.clock(), deps.leaseMs);
          if (!held) return; // another process took it first
          won++;
          if (deps.dispatcher.enqueue(storeJob(held)) === 'full') full.push(held._id);
        }),
      );
    }
    // No room after all: handed back at once (due now, one bucket write for all).
    if (full.length > 0) await releaseLeases(deps.collections, full, deps.owner, deps.clock());
    return won;
  }

  /**
   * Where a deferred entry goes: its subscription's deferred entries of this
   * bucket are spread at its pace here (paceOf per DEFER_MS), so a big
   * backlog is not read again, whole, every DEFER_MS.
   */
  private deferredTo(open: OpenBucket, subscriptionId: string, nowMs: number): number {
    const n = open.deferred.get(subscriptionId) ?? 0;
    open.deferred.set(subscriptionId, n + 1);
    const pace = Math.max(1, this.deps.dispatcher.paceOf(subscriptionId));
    return nowMs + DEFER_MS + Math.floor(n / pace) * DEFER_MS;
  }


  private async saveCursor(force: boolean): Promise<void> {
    if (!this.booted) return;
    const next = this.current ? this.current.b : this.cursor;
    if (next <= this.saved || (!force && Date.now() - this.savedAt < SAVE_CURSOR_MS)) return;
    await saveDueCursor(this.deps.collections.retryDue, next);
    this.saved = next;
    this.savedAt = Date.now();
  }

  private schedule(delayMs = this.deps.intervalMs): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      let next = this.deps.intervalMs;
      this.ticking = this.tick()
        // Stopped at its claim budget with room left: more is due, look again at once.
        .then((claimed) => {
          if (claimed >= MAX_CLAIMS_PER_TICK && this.deps.dispatcher.room > 0) next = 0;
        })
        .catch((err: unknown) => this.deps.log.warn({ err }, 'could not claim due deliveries; will try again'))
        .finally(() => {
          this.ticking = null;
          this.schedule(next);
        });
    }, delayMs);
    this.timer.unref();
  }
}

/** By `_id`, a few at once. */
async function readDeliveries(c: DeliveryCollections, ids: string[]): Promise<(DeliveryDoc | null)[]> {
  const out: (DeliveryDoc | null)[] = [];
  for (let i = 0; i < ids.length; i += READS_AT_ONCE) {
    out.push(...(await Promise.all(ids.slice(i, i + READS_AT_ONCE).map((_id) => c.deliveries.findOne({ _id })))));
  }
  return out;
}

/**
 * Once, when no scheduler has run on this database yet: pending deliveries an
 * earlier version stored have no bucket entry; they get one (a scan of the
 * deliveries, once at the first boot).
 */
async function bucketStoredDeliveries(c: DeliveryCollections, now: Date): Promise<number> {
  let n = 0;
  let batch: DueEntry[] = [];
  const cursor = c.deliveries.find({ state: 'pending' }, { projection: { _id: 1, subscription_id: 1, next_attempt_at: 1, lease_until: 1 } });
  for await (const d of cursor) {
    batch.push({ d: d._id, s: d.subscription_id, t: dueAt(d) });
    if (batch.length >= 1000) {
      await scheduleDue(c, batch, now.getTime());
      n += batch.length;
      batch = [];
    }
  }
  if (batch.length > 0) await scheduleDue(c, batch, now.getTime());
  return n + batch.length;
}

