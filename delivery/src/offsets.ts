import type { Collection } from 'mongodb';
import type { Logger } from '#shared/log.js';
import type { DeliveryProgressDoc } from '#shared/mongo/index.js';
import { PartitionProgress, Resume } from './partition-progress.js';

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
