import type { Collection } from 'mongodb';
import type { Logger } from '#shared/log.js';
import type { DeliveryProgressDoc } from '#shared/mongo/index.js';

/**
 * Which offset of each partition may be committed: the lowest offset whose
 * deliveries are not all finished (a delivery is finished once it succeeded
 * and its attempt is recorded, or once it is handed to the retry store), or
 * one past the last message seen when everything is finished. A slow
 * attempt so holds back the commit of its partition, never the sending of
 * the partition's other deliveries; a crash re-reads the log from the
 * committed offset and sends again what was not finished (at-least-once).
 */
export class PartitionProgress {
  /** Unfinished deliveries per offset (delivery id -> copies under way), for offsets with any. */
  private readonly pending = new Map<bigint, Map<string, number>>();
  /** Offsets with unfinished deliveries where some delivery already finished. */
  private readonly partly = new Set<bigint>();
  /** Offsets with unfinished deliveries, in the order seen (increasing). */
  private order: bigint[] = [];
  private head = 0;
  private next: bigint | null = null;
  /** The first offset seen in this generation. */
  private first: bigint | null = null;
  private count = 0;
  /** What a previous owner of the partition recorded as finished above the committed offset (read once per generation). */
  resume: Resume | null = null;

  /** `onFinish`: told after each delivery finished (the tracker writes the progress document then). */
  constructor(private readonly onFinish: () => void = () => undefined) {}

  /** Every message of the partition, in order, whether or not it has deliveries. */
  seen(offset: string): void {
    const at = BigInt(offset);
    this.first ??= at;
    if (this.next === null || at + 1n > this.next) this.next = at + 1n;
  }

  /** One more delivery (`id`) of the message at `offset` is under way. */
  add(offset: string, id: string): void {
    const at = BigInt(offset);
    this.first ??= at;
    let ids = this.pending.get(at);
    if (ids === undefined) {
      ids = new Map();
      this.pending.set(at, ids);
      this.order.push(at);
    }
    ids.set(id, (ids.get(id) ?? 0) + 1);
    this.count++;
  }

  finish(offset: string, id: string): void {
    const at = BigInt(offset);
    const ids = this.pending.get(at);
    const n = ids?.get(id);
    if (ids === undefined || n === undefined) return;
    if (n <= 1) ids.delete(id);
    else ids.set(id, n - 1);
    if (ids.size === 0) {
      this.pending.delete(at);
      this.partly.delete(at);
    } else this.partly.add(at);
    this.count--;
    this.onFinish();
  }

  /** Deliveries not finished. */
  get unfinished(): number {
    return this.count;
  }

  /** The offset to commit (the next message to read after a restart), or null before any message. */
  watermark(): string | null {
    while (this.head < this.order.length && !this.pending.has(this.order[this.head] as bigint)) this.head++;
    if (this.head > 1024 && this.head * 2 > this.order.length) {
      this.order = this.order.slice(this.head);
      this.head = 0;
    }
    const low = this.order[this.head];
    if (low !== undefined) return low.toString();
    return this.next === null ? null : this.next.toString();
  }

  /**
   * What is finished above `committed` (the last offset committed in this
   * generation, null before the first commit): every message in [from, to)
   * has all its deliveries finished but the `open` ones. At most `maxIds`
   * open ids are listed (`to` stops before the offset that would exceed
   * it). Null when nothing above the commit is finished (no document needed).
   */
  snapshot(committed: string | null, maxIds = MAX_OPEN_IDS): { from: string; to: string; open: { offset: string; ids: string[] }[] } | null {
    this.watermark(); // moves `head` past finished offsets
    if (this.next === null || this.first === null) return null;
    let from = committed === null ? this.first : BigInt(committed);
    if (from < this.first) from = this.first;
    let to = this.next;
    const open: { offset: string; ids: string[] }[] = [];
    let listed = 0;
    // One past the highest offset that says anything (some delivery finished there, or all of
    // them): above it everything is still open, and the log says as much.
    let useful = from;
    let prev = from - 1n;
    for (let i = this.head; i < this.order.length; i++) {
      const at = this.order[i] as bigint;
      const ids = this.pending.get(at);
      if (!ids || at < from) continue;
      if (listed + ids.size > maxIds) {
        to = at;
        break;
      }
      if (at > prev + 1n) useful = at; // finished offsets below it
      if (this.partly.has(at)) useful = at + 1n;
      prev = at;
      open.push({ offset: at.toString(), ids: [...ids.keys()] });
      listed += ids.size;
    }
    if (to > prev + 1n) useful = to; // finished offsets above the last open one
    if (useful < to) to = useful;
    while (open.length > 0 && BigInt((open[open.length - 1] as { offset: string }).offset) >= to) open.pop();
    // Nothing finished above the commit: the commit says it all.
    if (to <= from) return null;
    return { from: from.toString(), to: to.toString(), open };
  }
}

/** Open delivery ids listed in one progress document at most (beyond them, the log is simply read again). */
const MAX_OPEN_IDS = 4000;

/**
 * A previous owner's progress document, as this generation reads the
 * partition: a delivery it lists as finished is not sent again.
 */
export class Resume {
  private readonly from: bigint;
  private readonly to: bigint;
  private readonly open = new Map<bigint, Set<string>>();

  constructor(doc: Pick<DeliveryProgressDoc, 'from' | 'to' | 'open'>) {
    this.from = BigInt(doc.from);
    this.to = BigInt(doc.to);
    for (const o of doc.open) this.open.set(BigInt(o.offset), new Set(o.ids));
  }

  /**
   * Usable when this generation starts reading at or above where the
   * document starts: below it, the group's offsets were reset (a replay),
   * and everything is sent again as asked.
   */
  appliesFrom(firstOffset: string): boolean {
    return BigInt(firstOffset) >= this.from && BigInt(firstOffset) < this.to;
  }

  /** True when the delivery `id` of the message at `offset` was finished by the previous owner. */
  finished(offset: string, id: string): boolean {
    const at = BigInt(offset);
    if (at < this.from || at >= this.to) return false;
    const open = this.open.get(at);
    return open === undefined || !open.has(id);
  }
}

interface OffsetCommitter {
  commitOffsets(offsets: { topic: string; partition: number; offset: string }[]): Promise<void>;
}

/** Where the progress documents live (delivery_progress). */
export interface ProgressStore {
  read(id: string): Promise<DeliveryProgressDoc | null>;
  write(doc: DeliveryProgressDoc): Promise<void>;
}

export function mongoProgressStore(c: Collection<DeliveryProgressDoc>): ProgressStore {
  return {
    read: (id) => c.findOne({ _id: id }),
    write: async (doc) => {
      await c.replaceOne({ _id: doc._id }, doc, { upsert: true });
    },
  };
}

/** How long a first batch waits for its partition's progress document before reading on without it (duplicates only). */
const RESUME_READ_MS = 2000;
/** A progress write waits this long for other deliveries finishing with it (a record flush finishes many at once). */
const PROGRESS_LINGER_MS = 10;

/**
 * The progress of every partition this member consumes in its current
 * generation. A rebalance starts a new set (`reset`): deliveries of the old
 * generation still finish, but no longer commit or write anything; the
 * partition's next owner reads from the last committed offset, skipping
 * what the partition's progress document lists as finished above it.
 *
 * Progress documents: one per (group, topic, partition), keyed by `_id`,
 * written (replaced) after deliveries finished, one write at a time for the
 * whole tracker: a flush of records that finishes hundreds of deliveries
 * costs one write per partition touched. A document only ever calls
 * finished what was finished when it was built, so a lost or late write,
 * or an older owner's write landing after a newer one's, costs duplicates
 * and never a delivery.
 */
export class OffsetTracker {
  private partitions = new Map<number, PartitionProgress>();
  private readonly committed = new Map<number, string>();
  private committing: Promise<void> | null = null;
  private readonly dirty = new Set<number>();
  private writing: Promise<void> | null = null;
  private lingering = false;
  private readonly written = new Map<number, string>();

  constructor(
    private readonly topic: string,
    private readonly progress: { store: ProgressStore; group: string; log?: Logger } | null = null,
  ) {}

  of(partition: number): PartitionProgress {
    let p = this.partitions.get(partition);
    if (!p) {
      const generation = this.partitions;
      p = new PartitionProgress(() => {
        if (this.partitions !== generation || !this.progress) return; // an old generation's delivery: writes nothing
        this.dirty.add(partition);
        this.schedule();
      });
      this.partitions.set(partition, p);
    }
    return p;
  }

  reset(): void {
    this.partitions = new Map();
    this.committed.clear();
    this.dirty.clear();
    this.written.clear();
  }

  /** Deliveries not finished, over all partitions of this generation. */
  get unfinished(): number {
    let total = 0;
    for (const p of this.partitions.values()) total += p.unfinished;
    return total;
  }

  docId(partition: number): string {
    return `${this.progress?.group ?? ''}|${this.topic}|${partition}`;
  }

  /**
   * Before the first batch of a partition in this generation: reads the
   * partition's progress document (at most RESUME_READ_MS; without it the
   * log is read again from the commit, duplicates only) and keeps it if it
   * applies from `firstOffset`.
   */
  async resume(partition: number, firstOffset: string): Promise<void> {
    const p = this.of(partition);
    if (p.resume !== null || !this.progress) return;
    const { store, log } = this.progress;
    let timer: NodeJS.Timeout | undefined;
    const doc = await Promise.race([
      store.read(this.docId(partition)),
      new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), RESUME_READ_MS))),
    ])
      .catch((err: unknown) => {
        log?.info({ err, partition }, 'could not read the partition\'s delivery progress; reading on from the commit');
        return null;
      })
      .finally(() => clearTimeout(timer));
    const resume = doc ? new Resume(doc) : null;
    p.resume = resume && resume.appliesFrom(firstOffset) ? resume : new Resume({ from: '0', to: '0', open: [] });
    if (resume && p.resume === resume) log?.info({ partition, from: firstOffset, to: doc?.to, openOffsets: doc?.open.length, openDeliveries: doc?.open.reduce((n, o) => n + o.ids.length, 0) }, 'resuming a partition: deliveries finished above its commit are not sent again');
  }

  private schedule(): void {
    if (this.writing || this.lingering) return;
    this.lingering = true;
    setTimeout(() => {
      this.lingering = false;
      void this.writeProgress();
    }, PROGRESS_LINGER_MS).unref();
  }

  /** Writes the progress document of every partition where deliveries finished since its last write; one round at a time. */
  writeProgress(): Promise<void> {
    if (this.writing) return this.writing;
    if (!this.progress || this.dirty.size === 0) return Promise.resolve();
    const { store, log } = this.progress;
    const partitions = this.partitions;
    const round = [...this.dirty];
    this.dirty.clear();
    this.writing = (async () => {
      for (const partition of round) {
        const p = partitions.get(partition);
        const snap = p?.snapshot(this.committed.get(partition) ?? null);
        if (!snap || this.partitions !== partitions) continue;
        const key = JSON.stringify(snap);
        if (this.written.get(partition) === key) continue;
        try {
          await store.write({ _id: this.docId(partition), ...snap, at: new Date() });
          if (this.partitions === partitions) this.written.set(partition, key);
        } catch (err) {
          log?.debug({ err, partition }, 'could not write delivery progress; will try again');
          if (this.partitions === partitions) this.dirty.add(partition);
        }
      }
    })().finally(() => {
      this.writing = null;
      if (this.dirty.size > 0) this.schedule();
    });
    return this.writing;
  }

  /** Commits every partition whose watermark moved; one commit at a time. */
  commit(consumer: OffsetCommitter): Promise<void> {
    if (this.committing) return this.committing;
    const offsets: { topic: string; partition: number; offset: string }[] = [];
    for (const [partition, p] of this.partitions) {
      const offset = p.watermark();
      if (offset !== null && this.committed.get(partition) !== offset) offsets.push({ topic: this.topic, partition, offset });
    }
    if (offsets.length === 0) return Promise.resolve();
    const partitions = this.partitions;
    this.committing = consumer
      .commitOffsets(offsets)
      .then(() => {
        if (this.partitions !== partitions) return; // a rebalance meanwhile
        for (const o of offsets) this.committed.set(o.partition, o.offset);
      })
      .finally(() => (this.committing = null));
    return this.committing;
  }
}
