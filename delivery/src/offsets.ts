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
  /** Unfinished deliveries per offset, for offsets with any. */
  private readonly pending = new Map<bigint, number>();
  /** Offsets with unfinished deliveries, in the order seen (increasing). */
  private order: bigint[] = [];
  private head = 0;
  private next: bigint | null = null;

  /** Every message of the partition, in order, whether or not it has deliveries. */
  seen(offset: string): void {
    const at = BigInt(offset);
    if (this.next === null || at + 1n > this.next) this.next = at + 1n;
  }

  /** One more delivery of the message at `offset` is under way. */
  add(offset: string): void {
    const at = BigInt(offset);
    const n = this.pending.get(at);
    if (n === undefined) this.order.push(at);
    this.pending.set(at, (n ?? 0) + 1);
  }

  finish(offset: string): void {
    const at = BigInt(offset);
    const n = this.pending.get(at);
    if (n === undefined) return;
    if (n <= 1) this.pending.delete(at);
    else this.pending.set(at, n - 1);
  }

  /** Deliveries not finished. */
  get unfinished(): number {
    let total = 0;
    for (const n of this.pending.values()) total += n;
    return total;
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
}

export interface OffsetCommitter {
  commitOffsets(offsets: { topic: string; partition: number; offset: string }[]): Promise<void>;
}

/**
 * The progress of every partition this member consumes in its current
 * generation. A rebalance starts a new set (`reset`): deliveries of the old
 * generation still finish, but no longer commit anything; the partition's
 * next owner reads from the last committed offset.
 */
export class OffsetTracker {
  private partitions = new Map<number, PartitionProgress>();
  private readonly committed = new Map<number, string>();
  private committing: Promise<void> | null = null;

  constructor(private readonly topic: string) {}

  of(partition: number): PartitionProgress {
    let p = this.partitions.get(partition);
    if (!p) {
      p = new PartitionProgress();
      this.partitions.set(partition, p);
    }
    return p;
  }

  reset(): void {
    this.partitions = new Map();
    this.committed.clear();
  }

  /** Deliveries not finished, over all partitions of this generation. */
  get unfinished(): number {
    let total = 0;
    for (const p of this.partitions.values()) total += p.unfinished;
    return total;
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
