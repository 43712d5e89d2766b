/**
 * How far the materializer has written each partition into MongoDB, as this
 * process knows it. A watermark only grows, so any value once seen stays a
 * true lower bound: it is cached, and concurrent waiters share one MongoDB
 * read per partition and poll interval.
 */
import type { Collection } from 'mongodb';
import type { WatermarkDoc } from '#shared/mongo/documents.js';

export function watermarkId(topic: string, partition: number): string {
  return `${topic}:${partition}`;
}

export class WatermarkReader {
  private readonly known = new Map<number, bigint>();
  private readonly reads = new Map<number, Promise<void>>();
  /** When each partition's watermark was last read from MongoDB (ms). */
  private readonly readAt = new Map<number, number>();

  constructor(
    private readonly read: (partition: number) => Promise<bigint | null>,
    private readonly pollMs = 25,
  ) {}

  static forCollection(collection: Collection<WatermarkDoc>, topic: string, pollMs?: number): WatermarkReader {
    return new WatermarkReader(async (partition) => {
      const doc = await collection.findOne({ _id: watermarkId(topic, partition) }, { projection: { offset: 1 } });
      return doc ? BigInt(doc.offset) : null;
    }, pollMs);
  }

  /** The partition's watermark read from MongoDB now (-1 when nothing is materialized yet). */
  async current(partition: number): Promise<bigint> {
    await this.refresh(partition);
    return this.known.get(partition) ?? -1n;
  }

  /**
   * A watermark read from MongoDB at most about `maxAgeMs` ago: waits (at
   * most `waitMs`) for a read only when the last one is older than that, and
   * renews one older than `refreshMs` in the background. MongoDB down or slow
   * leaves the value known (a lower bound, never an error).
   */
  async recent(partition: number, maxAgeMs = 1000, refreshMs = 100, waitMs = 250): Promise<bigint> {
    const age = Date.now() - (this.readAt.get(partition) ?? 0);
    if (age >= maxAgeMs) await withinDeadline(this.refresh(partition).catch(() => undefined), Date.now() + waitMs);
    else if (age >= refreshMs) void this.refresh(partition).catch(() => undefined);
    return this.cached(partition);
  }

  /** The highest watermark known without reading MongoDB (-1 when none yet). */
  cached(partition: number): bigint {
    return this.known.get(partition) ?? -1n;
  }

  /** The materializer of this process reports its writes here: no read needed for them. */
  note(partition: number, offset: bigint): void {
    const current = this.known.get(partition);
    if (current === undefined || offset > current) this.known.set(partition, offset);
  }

  /** True once the partition is materialized through `offset`; false after `timeoutMs` (MongoDB down or the materializer behind). */
  async waitFor(partition: number, offset: bigint, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if ((this.known.get(partition) ?? -1n) >= offset) return true;
      if (Date.now() >= deadline) return false;
      // An unreachable or slow MongoDB is a timeout here, never a wait past the deadline.
      await withinDeadline(this.refresh(partition).catch(() => undefined), deadline);
      if ((this.known.get(partition) ?? -1n) >= offset) return true;
      await sleep(Math.min(this.pollMs, deadline - Date.now()));
    }
  }

  private refresh(partition: number): Promise<void> {
    let pending = this.reads.get(partition);
    if (!pending) {
      pending = this.read(partition)
        .then((offset) => {
          this.readAt.set(partition, Date.now());
          if (offset !== null) this.note(partition, offset);
        })
        .finally(() => this.reads.delete(partition));
      this.reads.set(partition, pending);
    }
    return pending;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}

async function withinDeadline(work: Promise<void>, deadline: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([work, new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.max(0, deadline - Date.now()))))]);
  } finally {
    clearTimeout(timer);
  }
}
