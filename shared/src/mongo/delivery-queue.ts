/**
 * The one way a delivery becomes stored, pending work: the delivery process
 * hands over what it could not finish from memory, and the API's operations
 * (resend, recover, replay) queue deliveries here too. How due work is found
 * again (the retry store's layout) is this module's business: callers only
 * insert complete DeliveryDoc records through insertDeliveries.
 *
 * The layout: a pending delivery is its DeliveryDoc (found by `_id`) plus an
 * entry in a time bucket of the `delivery_due` collection. Bucket b holds
 * what is due in [b * DUE_BUCKET_MS, (b + 1) * DUE_BUCKET_MS), as slot
 * documents `due:<b>:<n>`, n = 0, 1, ..., each one writer's batch. On our
 * FerretDB only `_id` equality reads and unique inserts are fast and atomic
 * (an `_id` range or `$in` reads the whole collection), so both sides use
 * nothing else:
 * - a writer inserts its batch at the first free n (a duplicate key: n + 1),
 *   never above a slot it has not seen taken (no holes: see DueWriteOrder);
 * - a reader of a bucket that is wholly in the past reads n = 0, 1, ... by
 *   `_id` until one is missing and inserts a seal there. A duplicate key on
 *   the seal means a writer got that n first: read it and go on. Once sealed
 *   a bucket never changes, so every reader gets the same list;
 * - a writer whose insert meets a seal moves its batch to a bucket that is
 *   not due yet. Nothing is lost between a writer and a late reader.
 * Entries never go into a bucket that is already over (their due time is
 * clamped to the writer's current bucket), so a reader that starts at a
 * bucket slightly in the past finds everything written since.
 */
import { createHash } from 'node:crypto';
import { MongoBulkWriteError, type Collection } from 'mongodb';
import type { DeliveryDoc, DueCursorDoc, DueEntry, DueSlotDoc, FifoHintDoc, FifoSlotDoc } from './documents.js';
import { isDuplicateKey } from './errors.js';

/** Deterministic, so consuming the same event twice finds the existing delivery. */
export function deliveryId(eventId: string, subscriptionId: string): string {
  return 'dlv_' + createHash('sha256').update(`${eventId}:${subscriptionId}`).digest('hex').slice(0, 24);
}

const DUPLICATE_KEY = 11000;
const INSERT_CHUNK = 1000;

/**
 * Width of a due bucket. A constant, not a setting: writers (the API too) and
 * readers must cut time the same way. A retry is picked up within about one
 * width after its due time; an idle scheduler reads (and seals) one bucket per
 * width: two requests.
 */
export const DUE_BUCKET_MS = 1000;

type DueCollection = Collection<DueSlotDoc | DueCursorDoc | FifoSlotDoc | FifoHintDoc>;
interface QueueCollections extends DueQueue {
  deliveries: Collection<DeliveryDoc>;
}

export function bucketOf(ms: number): number {
  return Math.floor(ms / DUE_BUCKET_MS);
}

/** Test hooks: force rare interleavings (a writer that meets a bucket sealed under it). */
export const dueStoreHooks: { beforeSlotInsert?: (bucket: number, n: number) => Promise<void> } = {};

/**
 * This process's write order into the due store: one per process, shared by
 * every writer of the process (built by the process's deps.ts; a test that
 * builds its own acts as one more process).
 *
 * Per bucket and collection, the next n to try, and the writes in order: a
 * process inserts slot n only after it saw slots 0..n-1 taken (its own
 * insert, or a duplicate key), so no writer leaves a hole below a slot it
 * wrote. That is what lets a reader stop (and seal) at the first missing n: a
 * slot above a hole would be missed by every reader. Per ordered queue, the
 * next slot to try (a hint: a taken one costs a duplicate key).
 */
export class DueWriteOrder {
  readonly nextSlot = new Map<string, number>();
  readonly fifoTail = new Map<string, number>();
  private readonly writing = new Map<string, Promise<unknown>>();

  /** One write per key (a bucket, or the ordered-queue appends) at a time in this process. */
  inOrder<T>(key: string, write: () => Promise<T>): Promise<T> {
    const run = (this.writing.get(key) ?? Promise.resolve()).then(write, write);
    const tail = run.catch(() => undefined);
    this.writing.set(key, tail);
    void tail.then(() => {
      if (this.writing.get(key) === tail) this.writing.delete(key);
    });
    return run;
  }
}

/** The due store and this process's write order into it. */
interface DueQueue {
  retryDue: DueCollection;
  dueWrites: DueWriteOrder;
}

function slotKey(coll: DueCollection, b: number): string {
  return `${coll.dbName}.${coll.collectionName}:${b}`;
}

/**
 * Sets fields of a hint document by `_id`, creating it when missing. Two
 * processes upserting a missing document at once may both try the insert, and
 * the loser's fails as a duplicate key (FerretDB always; MongoDB retries such an
 * upsert itself): the document exists then, so the same update is sent again.
 */
async function upsertHint(coll: DueCollection, id: string, set: Record<string, unknown>): Promise<void> {
  try {
    await coll.updateOne({ _id: id }, { $set: set }, { upsert: true });
  } catch (err) {
    if (!isDuplicateKey(err)) throw err;
    await coll.updateOne({ _id: id }, { $set: set }, { upsert: true });
  }
}

/**
 * Writes entries into their buckets, one slot insert per bucket. An entry due
 * before the current bucket goes into the current one. Resolves once every
 * entry is stored.
 */
export async function scheduleDue(q: DueQueue, entries: DueEntry[], nowMs = Date.now()): Promise<void> {
  const byBucket = new Map<number, DueEntry[]>();
  const current = bucketOf(nowMs);
  for (const e of entries) {
    const b = Math.max(bucketOf(e.t), current);
    const list = byBucket.get(b) ?? [];
    list.push(e);
    byBucket.set(b, list);
  }
  await Promise.all([...byBucket].map(([b, list]) => writeSlot(q, b, list)));
}

/** Largest batch in one slot document (a document stays far below the 16 MB limit). */
const SLOT_ENTRIES = 5000;

async function writeSlot(q: DueQueue, bucket: number, entries: DueEntry[]): Promise<void> {
  for (let i = 0; i < entries.length; i += SLOT_ENTRIES) {
    const chunk = entries.slice(i, i + SLOT_ENTRIES);
    // Sealed: the bucket is read already. Into one that is not due yet (readers only seal past buckets).
    for (let b = bucket; !(await q.dueWrites.inOrder(slotKey(q.retryDue, b), () => insertSlot(q, b, chunk))); ) b = Math.max(b + 1, bucketOf(Date.now()) + 1);
  }
}

/** Inserts at the first free slot of bucket b; false when the bucket is sealed. */
async function insertSlot(q: DueQueue, b: number, entries: DueEntry[]): Promise<boolean> {
  const { retryDue: coll, dueWrites } = q;
  const { nextSlot } = dueWrites;
  const key = slotKey(coll, b);
  for (let n = nextSlot.get(key) ?? 0; ; n++) {
    const _id = `due:${b}:${n}`;
    await dueStoreHooks.beforeSlotInsert?.(b, n);
    try {
      await coll.insertOne({ _id, b, entries, at: new Date() });
      nextSlot.set(key, n + 1);
      if (nextSlot.size > 10_000) nextSlot.clear(); // hints only: a lost one costs a duplicate key
      return true;
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
    }
    const taken = (await coll.findOne({ _id })) as DueSlotDoc | null;
    if (taken?.sealed) return false;
    nextSlot.set(key, n + 1);
  }
}

/**
 * Every entry of bucket b, sealing it: call only once the bucket is over.
 * Every reader of a bucket gets the same entries.
 */
export async function readBucket(coll: DueCollection, b: number): Promise<DueEntry[]> {
  const out: DueEntry[] = [];
  for (let n = 0; ; n++) {
    const _id = `due:${b}:${n}`;
    let slot = (await coll.findOne({ _id })) as DueSlotDoc | null;
    if (!slot) {
      try {
        await coll.insertOne({ _id, b, sealed: true, at: new Date() });
        return out;
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
      }
      // A writer (or another reader's seal) got there first.
      slot = (await coll.findOne({ _id })) as DueSlotDoc | null;
      if (!slot) throw new Error(`due slot ${_id} exists and cannot be read`);
    }
    if (slot.sealed) return out;
    out.push(...(slot.entries ?? []));
  }
}

/** The first bucket not yet handed out by any scheduler, or null before the first one ran. */
export async function readDueCursor(coll: DueCollection): Promise<number | null> {
  const doc = (await coll.findOne({ _id: 'cursor' })) as DueCursorDoc | null;
  return doc ? doc.next : null;
}

/**
 * Records that every bucket below `next` was handed out. Not atomic across
 * processes (FerretDB's updates are read-then-write): two writers may leave
 * the lower of their values, which only makes a restart read a few buckets
 * again; neither ever writes a bucket it has not handled itself.
 */
export async function saveDueCursor(coll: DueCollection, next: number): Promise<void> {
  await upsertHint(coll, 'cursor', { next, at: new Date() });
}

/** When a stored delivery is next to be looked at: its next attempt, or when its holder's lease runs out. */
export function dueAt(d: Pick<DeliveryDoc, 'next_attempt_at' | 'lease_until'>): number {
  return Math.max(d.next_attempt_at?.getTime() ?? 0, d.lease_until?.getTime() ?? 0);
}

/**
 * insertDeliveries' test hooks and its safety delay: `afterInsert` runs between
 * the delivery insert and its due entry (a test throws there to play a crash).
 */
export const insertHooks: { safetyMs: number; afterInsert?: (docs: DeliveryDoc[]) => Promise<void> } = { safetyMs: 60_000 };

/**
 * Inserts new deliveries and puts every pending one (new, or already there
 * from an earlier try) into its due bucket; returns the ids that were really
 * new (a re-consumed batch finds its deliveries already there and leaves them
 * to their holder).
 *
 * The order of the writes is what keeps a crash from losing a delivery:
 * 1. a safety entry per pending delivery, due at the later of its due time and
 *    now + insertHooks.safetyMs (a minute), before the delivery exists;
 * 2. the deliveries;
 * 3. the entry at the due time itself, for those due before the safety entry.
 * A crash after 1 leaves entries whose delivery does not exist: the scheduler
 * drops them (it reads the delivery by `_id` and drops one that is gone). A
 * crash after 2 leaves the delivery to its safety entry: sent a minute late,
 * not never (an API call without an Idempotency-Key is not repeated by
 * anyone). A scheduler reads an entry only once its bucket is over, so the
 * safety entry is read before its delivery exists only if the insert took
 * longer than the safety delay; then the entry of step 3, written after the
 * insert, still finds it (losing it takes that and a crash). The cost: a
 * delivery due within the minute has two entries; the later one finds it
 * done (or due later) and is dropped.
 *
 * Deliveries of a `fifo` subscription (`fifo: true`) are also appended to
 * its ordered queue, after step 2, in the order given, and their entries
 * are one poke of that queue per subscription instead of one per delivery
 * (the queue decides what is sent). A process runs its calls that carry
 * such deliveries one at a time, so its appends keep the order of its calls.
 */
export async function insertDeliveries(c: QueueCollections, docs: DeliveryDoc[]): Promise<Set<string>> {
  if (!docs.some((d) => d.fifo)) return insertChunks(c, docs);
  // Ordered queues are appended in call order: this process's calls that carry any run one at a time.
  return c.dueWrites.inOrder(`${c.retryDue.dbName}.${c.retryDue.collectionName}:fifo-appends`, () => insertChunks(c, docs));
}

/**
 * The due entries of pending deliveries due at `at(d)`: one per delivery,
 * except that a `fifo` subscription's deliveries get one poke of their
 * queue (fifoPoke) for all of them.
 */
function dueEntries(pending: DeliveryDoc[], at: (d: DeliveryDoc) => number): DueEntry[] {
  const out: DueEntry[] = [];
  const poked = new Set<string>();
  for (const d of pending) {
    if (!d.fifo) out.push({ d: d._id, s: d.subscription_id, t: at(d) });
    else if (!poked.has(d.subscription_id)) {
      poked.add(d.subscription_id);
      out.push(fifoPoke(d.subscription_id, at(d)));
    }
  }
  return out;
}

async function insertChunks(c: QueueCollections, docs: DeliveryDoc[]): Promise<Set<string>> {
  const inserted = new Set<string>();
  for (let i = 0; i < docs.length; i += INSERT_CHUNK) {
    const chunk = docs.slice(i, i + INSERT_CHUNK);
    const pending = chunk.filter((d) => d.state === 'pending');
    const safeFrom = Date.now() + insertHooks.safetyMs;
    if (pending.length > 0) await scheduleDue(c, dueEntries(pending, (d) => Math.max(dueAt(d), safeFrom)));
    try {
      await c.deliveries.insertMany(chunk, { ordered: false });
      for (const d of chunk) inserted.add(d._id);
    } catch (err) {
      if (!(err instanceof MongoBulkWriteError)) throw err;
      const errors = Array.isArray(err.writeErrors) ? err.writeErrors : [err.writeErrors];
      if (errors.some((e) => e.code !== DUPLICATE_KEY)) throw err;
      const failed = new Set(errors.map((e) => e.index));
      chunk.forEach((d, index) => {
        if (!failed.has(index)) inserted.add(d._id);
      });
    }
    await insertHooks.afterInsert?.(chunk);
    // After the deliveries (a queue's reader always finds the ones it lists), before their pokes.
    // One already there (a repeat) is listed again: a later copy finds it finished and is passed over.
    for (const [subscriptionId, ids] of fifoBySubscription(pending)) await appendFifo(c, subscriptionId, ids);
    const due = dueEntries(
      pending.filter((d) => dueAt(d) < safeFrom),
      (d) => dueAt(d),
    );
    if (due.length > 0) await scheduleDue(c, due);
  }
  return inserted;
}

function fifoBySubscription(docs: DeliveryDoc[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const d of docs) {
    if (!d.fifo) continue;
    const ids = out.get(d.subscription_id) ?? [];
    ids.push(d._id);
    out.set(d.subscription_id, ids);
  }
  return out;
}

/**
 * A `fifo` subscription's ordered queue (FifoSlotDoc): slots
 * `fifo:<subscription>:<n>`, each a writer's batch of delivery ids, taken by
 * unique insert at the first free n from the tail hint, so there is never a
 * hole below a slot; slots never change. The head hint says where the
 * unfinished part starts; it and the tail hint are written after the fact
 * and may lag (a reader walks on from them), never lead. delivery/src/fifo.ts
 * reads the queue and hands out its head.
 */
export const FIFO_POKE_PREFIX = 'fifo:';

/** A due entry that makes the schedulers look at the subscription's queue (its `d` names no delivery). */
export function fifoPoke(subscriptionId: string, t: number): DueEntry {
  return { d: FIFO_POKE_PREFIX + subscriptionId, s: subscriptionId, t };
}

const fifoSlotId = (subscriptionId: string, n: number): string => `fifo:${subscriptionId}:${n}`;
const fifoHeadId = (subscriptionId: string): string => `fifoh:${subscriptionId}`;
const fifoTailId = (subscriptionId: string): string => `fifot:${subscriptionId}`;

/** Appends `ids`, in this order, as one slot at the queue's tail. */
async function appendFifo(q: DueQueue, subscriptionId: string, ids: string[]): Promise<void> {
  if (ids.length === 0) return;
  const { retryDue: coll, dueWrites } = q;
  const { fifoTail } = dueWrites;
  const key = `${coll.dbName}.${coll.collectionName}:${subscriptionId}`;
  let n = fifoTail.get(key) ?? (((await coll.findOne({ _id: fifoTailId(subscriptionId) })) as FifoHintDoc | null)?.n ?? 0);
  for (; ; n++) {
    try {
      await coll.insertOne({ _id: fifoSlotId(subscriptionId, n), s: subscriptionId, entries: ids, appended_at: new Date() });
      break;
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
    }
  }
  if (fifoTail.size > 10_000) fifoTail.clear();
  fifoTail.set(key, n + 1);
  await upsertHint(coll, fifoTailId(subscriptionId), { n: n + 1, at: new Date() });
}

/** Slot n of the subscription's queue; null when nothing was appended there yet. */
export async function readFifoSlot(coll: DueCollection, subscriptionId: string, n: number): Promise<FifoSlotDoc | null> {
  return (await coll.findOne({ _id: fifoSlotId(subscriptionId, n) })) as FifoSlotDoc | null;
}

/** The tail hint: every slot below it was taken (it may lag behind). */
export async function readFifoTail(coll: DueCollection, subscriptionId: string): Promise<number> {
  return ((await coll.findOne({ _id: fifoTailId(subscriptionId) })) as FifoHintDoc | null)?.n ?? 0;
}

/**
 * Removes ordered-queue slots appended before `before` that lie wholly
 * behind their queue's head hint (every delivery they list was finished:
 * the hint only ever says so). A reader that meets a removed slot (its hint
 * lagged far behind) steps over it: it is below the tail. At most `limit`
 * slots per call; returns how many were removed.
 */
export async function sweepFifoSlots(coll: DueCollection, before: Date, limit = 1000): Promise<number> {
  const old = (await coll
    .find({ appended_at: { $lt: before } }, { projection: { _id: 1, s: 1 } })
    .limit(limit)
    .toArray()) as Pick<FifoSlotDoc, '_id' | 's'>[];
  const heads = new Map<string, number>();
  let removed = 0;
  for (const slot of old) {
    const n = Number(slot._id.slice(slot._id.lastIndexOf(':') + 1));
    let head = heads.get(slot.s);
    if (head === undefined) {
      head = (await readFifoHead(coll, slot.s)).n;
      heads.set(slot.s, head);
    }
    if (!Number.isInteger(n) || n >= head) continue;
    removed += (await coll.deleteOne({ _id: slot._id })).deletedCount;
  }
  return removed;
}

/** Where the unfinished part of the queue starts, as last written (it may lag behind). */
export async function readFifoHead(coll: DueCollection, subscriptionId: string): Promise<{ n: number; i: number }> {
  const doc = (await coll.findOne({ _id: fifoHeadId(subscriptionId) })) as FifoHintDoc | null;
  return { n: doc?.n ?? 0, i: doc?.i ?? 0 };
}

/** Write only a position every entry before which is finished (a lagging writer only moves it back). */
export async function saveFifoHead(coll: DueCollection, subscriptionId: string, at: { n: number; i: number }): Promise<void> {
  await upsertHint(coll, fifoHeadId(subscriptionId), { n: at.n, i: at.i, at: new Date() });
}
