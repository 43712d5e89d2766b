/**
 * Ordered delivery (`ordering: "fifo"`): a subscription's deliveries are sent
 * one at a time, in the order of its queue, and each waits until the one
 * before it succeeded or was given up.
 *
 * Every delivery of a fifo subscription is stored (never sent from memory):
 * the consumer appends a batch's deliveries to the subscription's queue in
 * log order (shared/src/mongo/delivery-queue.ts, appendFifo), and the API's
 * resend, recover and replay append theirs in the order of their requests.
 * Only the head is ever claimed: the first entry, in queue order, whose
 * delivery is still pending. Stepping a queue walks from the head hint past
 * finished (or gone) deliveries to that head, then:
 * - held here (queued, sending, recording): nothing; its finish steps again;
 * - leased by another process: a poke at the lease's end (a holder that dies
 *   is looked at again then);
 * - waiting for its next attempt: nothing; the recorder bucketed that retry
 *   (the delivery's own entry, which steps the queue when read);
 * - due and unleased: a poke at the end of the lease about to be taken (the
 *   claimer may die holding it), then the claim (a unique insert, so one
 *   process wins) and the dispatcher's queue.
 * Every claim of a later entry is made after reading every earlier entry
 * finished, and finished is final, so no process (however stale its hints)
 * sends a delivery while an earlier one of the same queue is pending.
 *
 * A queue is stepped when a due entry of it is read (a poke, or the entry of
 * one of its deliveries: a retry, a lease check, a release), and at once by
 * this process after it finished the head or appended to the queue. No step
 * holds the partition consumer, its offsets or another subscription's sends:
 * a held queue is a pending delivery in the store and nothing else.
 */
import type { Logger } from '#shared/log.js';
import { fifoPoke, readFifoHead, readFifoSlot, readFifoTail, saveFifoHead, scheduleDue } from '#shared/mongo/delivery-queue.js';
import type { FifoSlotDoc } from '#shared/mongo/index.js';
import { claim, releaseLeases, type DeliveryCollections } from './deliveries.js';
import type { Dispatcher } from './dispatch.js';
import { storeJob } from './jobs.js';

interface FifoDeps {
  log: Logger;
  collections: DeliveryCollections;
  dispatcher: Pick<Dispatcher, 'room' | 'holds' | 'roomFor' | 'enqueue'>;
  owner: string;
  leaseMs: number;
  clock: () => Date;
}

/** Entries walked per step at most; a longer run of finished ones is walked on by the next step (a poke now). */
const MAX_WALK = 1000;
/** A head that finds no room here is looked at again this much later. */
const NO_ROOM_MS = 1000;
/** Slots remembered (they never change once written). */
const CACHED_SLOTS = 2000;

export class FifoQueues {
  private readonly steps = new Map<string, { again: boolean; done: Promise<void> }>();
  private readonly slots = new Map<string, FifoSlotDoc>();
  private stopped = false;

  constructor(private readonly deps: FifoDeps) {}

  stop(): void {
    this.stopped = true;
  }

  /** Steps the queue in the background (after a finish or an append here); a failure is looked at again shortly. */
  poke(subscriptionId: string): void {
    if (this.stopped) return;
    this.step(subscriptionId).catch((err: unknown) => {
      this.deps.log.warn({ err, subscription: subscriptionId }, 'could not step an ordered queue; looking at it again shortly');
      scheduleDue(this.deps.collections, [fifoPoke(subscriptionId, Date.now() + NO_ROOM_MS)]).catch((e: unknown) =>
        this.deps.log.warn({ err: e, subscription: subscriptionId }, 'could not schedule a look at an ordered queue; its next entry or lease check will'),
      );
    });
  }

  /**
   * Hands out the queue's head if it is due and nobody holds it. One step
   * per queue at a time here: a call during one runs it again once it ends,
   * and resolves after that.
   */
  step(subscriptionId: string): Promise<void> {
    const running = this.steps.get(subscriptionId);
    if (running) {
      running.again = true;
      return running.done;
    }
    const state = { again: false, done: Promise.resolve() };
    state.done = (async () => {
      try {
        do {
          state.again = false;
          await this.stepOnce(subscriptionId);
        } while (state.again && !this.stopped);
      } finally {
        this.steps.delete(subscriptionId);
      }
    })();
    this.steps.set(subscriptionId, state);
    return state.done;
  }

  private async slot(subscriptionId: string, n: number): Promise<FifoSlotDoc | null> {
    const key = `${subscriptionId}:${n}`;
    const cached = this.slots.get(key);
    if (cached) return cached;
    const slot = await readFifoSlot(this.deps.collections.retryDue, subscriptionId, n);
    if (slot) {
      if (this.slots.size >= CACHED_SLOTS) this.slots.clear();
      this.slots.set(key, slot);
    }
    return slot;
  }

  private async stepOnce(subscriptionId: string): Promise<void> {
    const { deps } = this;
    const c = deps.collections;
    const from = await readFifoHead(c.retryDue, subscriptionId);
    let { n, i } = from;
    const save = async (): Promise<void> => {
      if (n !== from.n || i !== from.i) await saveFifoHead(c.retryDue, subscriptionId, { n, i });
    };
    for (let walked = 0; ; ) {
      if (walked >= MAX_WALK) {
        await save();
        await scheduleDue(c, [fifoPoke(subscriptionId, Date.now())]);
        return;
      }
      const slot = await this.slot(subscriptionId, n);
      if (!slot) {
        // Below the tail: removed by the retention sweep (wholly finished), from a hint that lagged far behind.
        if (n < (await readFifoTail(c.retryDue, subscriptionId))) {
          n++;
          i = 0;
          walked++;
          continue;
        }
        // Nothing appended here yet: every entry is finished (an append pokes the queue).
        return save();
      }
      if (i >= slot.entries.length) {
        n++;
        i = 0;
        continue;
      }
      const id = slot.entries[i] as string;
      // Queued, sending or recording here: its finish steps the queue again.
      if (deps.dispatcher.holds(id)) return save();
      const doc = await c.deliveries.findOne({ _id: id });
      if (!doc || doc.state !== 'pending') {
        i++;
        walked++;
        continue;
      }
      await save();
      const now = deps.clock();
      const nowMs = now.getTime();
      const lease = doc.lease_until?.getTime() ?? 0;
      if (lease > nowMs) {
        // Another process holds it: looked at again when its lease ends (or is extended).
        await scheduleDue(c, [fifoPoke(subscriptionId, lease)], nowMs);
        return;
      }
      // Waiting for its next attempt: its own entry (bucketed with the retry) steps the queue then.
      if (!doc.next_attempt_at || doc.next_attempt_at.getTime() > nowMs) return;
      if (deps.dispatcher.room <= 0 || deps.dispatcher.roomFor(subscriptionId) <= 0) {
        await scheduleDue(c, [fifoPoke(subscriptionId, nowMs + NO_ROOM_MS)], nowMs);
        return;
      }
      // Stored before the claim: a claimer that dies holding it is looked at again at the lease's end.
      await scheduleDue(c, [fifoPoke(subscriptionId, nowMs + deps.leaseMs)], nowMs);
      const held = await claim(c, doc, deps.owner, now, deps.leaseMs);
      if (!held) return; // another process took it first
      // Not taken (no room, or the dispatcher is stopping): handed back at once rather than left to its lease,
      // which would hold the whole queue that long. One already held here keeps its lease.
      const taken = deps.dispatcher.enqueue(storeJob(held));
      if (taken === 'full' || (taken === 'duplicate' && !deps.dispatcher.holds(held._id))) await releaseLeases(c, [held._id], deps.owner, deps.clock());
      return;
    }
  }
}
