/**
 * Records finished attempts, in batches. Per attempt, in this order: the
 * attempt itself first (so a crash right after sending can at worst repeat a
 * recorded attempt, never lose one), then the delivery's new state (only
 * while we still hold it), then the subscription's last_* fields (only if no
 * later attempt was recorded there; in their own document, webhook_status,
 * never in the subscription's, which only the API writes: see WebhookDoc). A batch keeps that order step by step
 * (every attempt of the batch, then every delivery, then the subscriptions),
 * so a crash between two steps leaves what it always left: a recorded attempt
 * whose delivery is still leased and is retried when the lease runs out. What changes is the number of round trips:
 * one flush runs at a time and takes everything that finished meanwhile, so
 * under load n attempts cost 3 requests instead of 3n, and a subscription's
 * last_* fields are written once per flush (the latest attempt wins, as it
 * would have after n separate writes). With little traffic a flush holds one
 * attempt and nothing waits.
 */
import { MongoBulkWriteError } from 'mongodb';
import type { Logger } from '#shared/log.js';
import { insertDeliveries, scheduleDue } from '#shared/mongo/delivery-queue.js';
import { withTimeout } from '#shared/timeout.js';
import { attemptDoc, nextAttemptOf, recordStateOf, storedAfter } from './attempt-docs.js';
import type { AttemptRecord, DeliveryCollections } from './deliveries.js';
import type { EndpointHealth } from './endpoint-health.js';
import { StatusWriter } from './status-writer.js';

interface Pending {
  record: AttemptRecord;
  attemptId: string;
  /** Read from the log, never stored: a failure becomes its retry document here; a success needs nothing more. */
  fresh: boolean;
  settle: { resolve(): void; reject(err: unknown): void };
}

/** How long a flush waits for more attempts to join it (see flushNext). */
const RECORD_LINGER_MS = 20;

/** At most this many attempts per flush (one insertMany and bulkWrites of this size). */
const MAX_BATCH = 500;

/**
 * After a failed batch write, each record is tried again (pauses growing to
 * 2 s) for up to this long before its delivery is left to its lease: the
 * lease keeper holds the delivery meanwhile, so a store that stalls for
 * seconds costs a late record, not a second send.
 */
const RECORD_RETRY_MS = 60_000;
const RETRY_PAUSE_MS = 500;

/**
 * One write of a flush that has not answered in this long is taken as failed
 * and tried again (the driver sets no time limit of its own: a write the store
 * never answers, as FerretDB can stall, would otherwise hold the one writer,
 * and every record behind it, for good). Every step is safe to repeat while
 * the first try may still land: attempts by their ids (a duplicate is taken as
 * written), retry documents and due entries by unique insert, states by
 * their claim.
 */
const WRITE_LIMIT_MS = 15_000;

class WriteTimeout extends Error {
  override readonly name = 'WriteTimeout';
}
const DUPLICATE_KEY = 11000;

export class AttemptRecorder {
  private queue: Pending[] = [];
  private flushing: Promise<void> | null = null;
  private drained: (() => void)[] = [];
  private readonly status: StatusWriter;

  private readonly writeLimitMs: number;

  constructor(
    private readonly c: DeliveryCollections,
    private readonly log?: Logger,
    health?: EndpointHealth,
    opts: { writeLimitMs?: number } = {},
  ) {
    this.status = new StatusWriter(c, log, health);
    this.writeLimitMs = opts.writeLimitMs ?? WRITE_LIMIT_MS;
  }

  /** One write, taken as failed once it has not answered within the limit (it may still land: every step repeats safely). */
  private async bounded(batch: Pending[]): Promise<void> {
    const write = this.write(batch);
    write.catch(() => undefined); // a late failure of a write already given up on
    await withTimeout(write, this.writeLimitMs, () => new WriteTimeout(`no answer from the store within ${this.writeLimitMs} ms`));
  }

  /**
   * Resolves once the attempt and the delivery's state are written (for a
   * fresh delivery: its retry document when it failed); the subscription's
   * last_* follow within STATUS_COALESCE_MS.
   */
  record(record: AttemptRecord, attemptId: string, fresh = false): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ record, attemptId, fresh, settle: { resolve, reject } });
      if (!this.flushing) this.flushNext();
    });
  }

  /** Writes the coalesced last_* still waiting (shutdown). */
  flushStatus(): Promise<void> {
    return this.status.flushAll();
  }

  /** Records queued or being written. */
  get pending(): number {
    return this.queue.length + (this.flushing ? 1 : 0);
  }

  /** Resolves once nothing is queued or being written (shutdown: flush before exit). */
  idle(): Promise<void> {
    if (!this.flushing && this.queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.drained.push(resolve));
  }

  private flushNext(): void {
    if (this.queue.length === 0) {
      for (const wake of this.drained.splice(0)) wake();
      return;
    }
    // A short linger gathers the attempts of paced traffic into one insertMany (what waits is
    // the record and the offset commit behind it, never a send).
    const linger = this.queue.length < MAX_BATCH ? new Promise((r) => setTimeout(r, RECORD_LINGER_MS)) : Promise.resolve();
    this.flushing = linger.then(() => this.writeBatch(this.queue.splice(0, MAX_BATCH))).finally(() => {
      this.flushing = null;
      this.flushNext();
    });
  }

  /**
   * The whole batch in three steps; if that fails, record by record (with a
   * few tries each), so one record the store refuses, or a write cut short,
   * fails only its own delivery (left to its lease and retried), not the
   * hundreds of others in the batch.
   */
  private async writeBatch(batch: Pending[]): Promise<void> {
    try {
      await this.bounded(batch);
      // Recorded: the deliveries are finished (their offsets and progress move on). The
      // subscriptions' coalesced last_* are written behind, one writer at a time.
      for (const p of batch) p.settle.resolve();
      this.offerStatus(batch);
      return;
    } catch (err) {
      if (batch.length > 1) this.log?.warn({ err, records: batch.length }, 'could not write a batch of attempt records; writing them one by one');
      else if (batch.length === 1) this.log?.warn({ err }, 'could not write an attempt record; trying again');
    }
    const deadline = Date.now() + RECORD_RETRY_MS;
    for (const p of batch) {
      for (let tries = 1; ; tries++) {
        try {
          await this.bounded([p]);
          p.settle.resolve();
          this.offerStatus([p]);
          break;
        } catch (err) {
          if (Date.now() >= deadline) {
            p.settle.reject(err);
            break;
          }
          await new Promise((r) => setTimeout(r, Math.min(2000, RETRY_PAUSE_MS * tries)));
        }
      }
    }
  }

  /**
   * Not awaited by the flush: three subscriptions' status writes one after
   * another held the next flush, and so every delivery recorded in it (and the
   * offsets and progress behind them), for several store round trips; the
   * duplicates a kill leaves grew with that wait.
   */
  private offerStatus(batch: Pending[]): void {
    this.status.offer(batch.map((p) => p.record)).catch((err: unknown) => this.log?.warn({ err }, 'could not write subscriptions\' last delivery status'));
  }

  private async write(batch: Pending[]): Promise<void> {
    try {
      await this.c.attempts.insertMany(
        batch.map((p) => attemptDoc(p.record, p.attemptId)),
        { ordered: false },
      );
    } catch (err) {
      // Written by an earlier try of this record: not an error.
      if (!(err instanceof MongoBulkWriteError)) throw err;
      const errors = Array.isArray(err.writeErrors) ? err.writeErrors : [err.writeErrors];
      if (errors.some((e) => e.code !== DUPLICATE_KEY)) throw err;
    }
    // A fresh delivery that failed is handed to the retry store here (or kept as failed when
    // that was its last attempt): the delivery, then its due bucket entry (insertDeliveries);
    // a fresh success needs no delivery document at all.
    const handed = batch.filter((p) => p.fresh && p.record.outcome !== 'ok').map((p) => storedAfter(p.record));
    if (handed.length > 0) await insertDeliveries(this.c, handed);
    // A stored delivery's retry goes into its due bucket before the delivery shows it (one slot
    // per bucket for the whole batch): a crash between the two leaves the delivery leased, and
    // the lease check its claim bucketed picks it up.
    const retries = batch.filter((p) => !p.fresh && nextAttemptOf(p.record) !== null).map((p) => ({ d: p.record.delivery._id, s: p.record.delivery.subscription_id, t: (nextAttemptOf(p.record) as Date).getTime() }));
    if (retries.length > 0) await scheduleDue(this.c, retries);
    // One update after another, not a bulkWrite: FerretDB 1.24 stalls for minutes on an
    // update command of a few hundred statements (measured: 2 fine, 200 never returned
    // in 60 s), and one writer at a time also spares SQLite its lock contention.
    for (const p of batch) if (!p.fresh) await recordStateOf(this.c, p.record);
    // The subscriptions' last_* follow (offerStatus), after the records are settled.
  }
}
