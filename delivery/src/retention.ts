/**
 * Keeps the delivery records from growing without end. TTL indexes would do
 * this on MongoDB, but FerretDB has none, so the delivery process sweeps:
 * attempts and finished deliveries older than the retention period, and
 * claim documents once far older than any read that could still race them,
 * and retry buckets an hour behind the schedulers' cursor (every scheduler
 * has read them; the filter on b is a scan on FerretDB, but only every ten
 * minutes), and ordered-queue slots past the retention period that lie
 * wholly behind their queue's head.
 */
import type { Logger } from '#shared/log.js';
import { runPeriodically } from '#shared/periodic.js';
import { DUE_BUCKET_MS, readDueCursor, sweepFifoSlots } from '#shared/mongo/delivery-queue.js';
import type { DeliveryCollections } from './deliveries.js';

const DAY = 24 * 3600 * 1000;
/** Claims only guard against stale reads (seconds old); a day is far beyond any. */
const CLAIM_RETENTION_MS = DAY;
/** Read buckets are kept this long behind the cursor (a scheduler lagging behind the stored cursor still finds them). */
const DUE_RETENTION_BUCKETS = 3_600_000 / DUE_BUCKET_MS;

interface SweepCounts {
  attempts: number;
  deliveries: number;
  claims: number;
  dueSlots: number;
  fifoSlots: number;
}

export async function sweepOnce(c: DeliveryCollections, now: Date, retentionMs: number): Promise<SweepCounts> {
  const before = new Date(now.getTime() - retentionMs);
  const attempts = await c.attempts.deleteMany({ at: { $lt: before } });
  const deliveries = await c.deliveries.deleteMany({ state: { $in: ['succeeded', 'failed'] }, updated_at: { $lt: before } });
  const claims = await c.claims.deleteMany({ at: { $lt: new Date(now.getTime() - CLAIM_RETENTION_MS) } });
  const cursor = await readDueCursor(c.retryDue);
  const dueSlots = cursor === null ? 0 : (await c.retryDue.deleteMany({ b: { $lt: cursor - DUE_RETENTION_BUCKETS } })).deletedCount;
  const fifoSlots = await sweepFifoSlots(c.retryDue, before);
  return { attempts: attempts.deletedCount, deliveries: deliveries.deletedCount, claims: claims.deletedCount, dueSlots, fifoSlots };
}

/** Sweeps every `intervalMs` (first after one interval); returns a stop function. */
export function startSweeper(opts: { collections: DeliveryCollections; log: Logger; retentionMs: number; intervalMs: number; clock: () => Date }): () => void {
  return runPeriodically(opts.intervalMs, () => {
    sweepOnce(opts.collections, opts.clock(), opts.retentionMs).then(
      (counts) => {
        if (counts.attempts + counts.deliveries + counts.claims + counts.dueSlots + counts.fifoSlots > 0) opts.log.info(counts, 'swept old delivery records');
      },
      (err: unknown) => opts.log.warn({ err }, 'could not sweep old delivery records; will try again'),
    );
  });
}
