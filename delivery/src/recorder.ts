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
import { MongoBulkWriteError, type Filter, type UpdateFilter } from 'mongodb';
import type { Logger } from '#shared/log.js';
import type { AttemptDoc, DeliveryDoc, WebhookStatusDoc } from '#shared/mongo/index.js';
import { insertDeliveries, scheduleDue } from '#shared/mongo/delivery-queue.js';
import { withTimeout } from '#shared/timeout.js';
import { atomicWrites, type AttemptRecord, type DeliveryCollections } from './deliveries.js';
import type { EndpointHealth, FailingUpdate } from './endpoint-health.js';

interface Pending {
  record: AttemptRecord;
  attemptId: string;
  /** Read from the log, never stored: a failure becomes its retry document here; a success needs nothing more. */
  fresh: boolean;
  settle: { resolve(): void; reject(err: unknown): void };
}

/** A subscription's last_* fields are written at most once per this long (the latest attempt wins). */
const STATUS_COALESCE_MS = 250;

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
    if (retries.length > 0) await scheduleDue(this.c.retryDue, retries);
    // One update after another, not a bulkWrite: FerretDB 1.24 stalls for minutes on an
    // update command of a few hundred statements (measured: 2 fine, 200 never returned
    // in 60 s), and one writer at a time also spares SQLite its lock contention.
    for (const p of batch) if (!p.fresh) await recordStateOf(this.c, p.record);
    // The subscriptions' last_* follow (offerStatus), after the records are settled.
  }
}

/**
 * Coalesces the subscriptions' last_* writes: a subscription not written in
 * the last STATUS_COALESCE_MS is written at once (with little traffic the
 * status is there as soon as the attempt is); otherwise its latest attempt
 * waits for the end of that window and is written then, once.
 */
/** A flush waits for its status writes when there are at most this many (see write). */
const AWAITED_STATUS_WRITES = 4;

class StatusWriter {
  private readonly lastWrite = new Map<string, number>();
  private readonly waiting = new Map<string, AttemptRecord>();
  private timer: NodeJS.Timeout | null = null;
  private writing: Promise<void> = Promise.resolve();

  constructor(
    private readonly c: DeliveryCollections,
    private readonly log?: Logger,
    /** Its failing_since goes with each write (endpoint-health.ts). */
    private readonly health?: EndpointHealth,
  ) {}

  offer(records: AttemptRecord[]): Promise<void> {
    const now = Date.now();
    if (this.health) for (const r of records) this.health.note(r);
    const due: AttemptRecord[] = [];
    for (const r of latestPerSubscription(records)) {
      const id = r.delivery.subscription_id;
      const seen = this.waiting.get(id);
      const latest = seen && seen.at.getTime() > r.at.getTime() ? seen : r;
      if (now - (this.lastWrite.get(id) ?? 0) >= STATUS_COALESCE_MS && !this.waiting.has(id)) {
        this.lastWrite.set(id, now);
        due.push(latest);
      } else {
        this.waiting.set(id, latest);
        this.arm();
      }
    }
    if (due.length === 0) return Promise.resolve();
    const written = this.write(due);
    if (due.length <= AWAITED_STATUS_WRITES) return written;
    written.catch((err: unknown) => this.log?.warn({ err }, 'could not write subscriptions\' last delivery status'));
    return Promise.resolve();
  }

  flushAll(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const all = [...this.waiting.values()];
    this.waiting.clear();
    return all.length > 0 ? this.write(all).then(() => this.writing) : this.writing;
  }

  private arm(): void {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      const now = Date.now();
      const due: AttemptRecord[] = [];
      for (const [id, r] of this.waiting) {
        if (now - (this.lastWrite.get(id) ?? 0) < STATUS_COALESCE_MS) continue;
        this.waiting.delete(id);
        this.lastWrite.set(id, now);
        due.push(r);
      }
      if (this.waiting.size > 0) this.arm();
      this.write(due).catch((err: unknown) => this.log?.warn({ err }, 'could not write subscriptions\' last delivery status'));
    }, STATUS_COALESCE_MS);
    this.timer.unref();
    if (this.lastWrite.size > 10_000) this.forgetOld();
  }

  private forgetOld(): void {
    const cutoff = Date.now() - STATUS_COALESCE_MS;
    for (const [id, at] of this.lastWrite) if (at < cutoff) this.lastWrite.delete(id);
  }

  /** One writer at a time, in order. */
  private write(records: AttemptRecord[]): Promise<void> {
    const run = this.writing.then(async () => {
      for (const r of latestPerSubscription(records)) {
        const [filter, update] = subscriptionUpdate(r);
        const failing = this.health?.statusUpdate(filter._id) ?? {};
        await writeStatus(this.c, filter, { ...update, ...failing, $set: { ...update.$set, ...failing.$set } });
        this.health?.written(filter._id, r);
      }
    });
    this.writing = run.catch(() => undefined);
    return run;
  }
}

function latestPerSubscription(records: AttemptRecord[]): AttemptRecord[] {
  const latest = new Map<string, AttemptRecord>();
  for (const r of records) {
    const seen = latest.get(r.delivery.subscription_id);
    if (!seen || seen.at.getTime() <= r.at.getTime()) latest.set(r.delivery.subscription_id, r);
  }
  return [...latest.values()];
}

/** The stored document of a fresh delivery after a failed attempt: due for its retry, or failed for good. */
function storedAfter(r: AttemptRecord): DeliveryDoc {
  return { ...r.delivery, ...stateAfter(r) };
}

/** A delivery's fields after an attempt: succeeded, pending its retry (unleased), or failed for good. */
function stateAfter(r: AttemptRecord): Pick<DeliveryDoc, 'state' | 'attempts' | 'next_attempt_at' | 'lease_owner' | 'lease_until' | 'last_status' | 'last_outcome' | 'updated_at'> {
  const next = nextAttemptOf(r);
  return {
    state: r.outcome === 'ok' ? 'succeeded' : next ? 'pending' : 'failed',
    attempts: r.attempt,
    next_attempt_at: next,
    lease_owner: null,
    lease_until: null,
    last_status: r.status,
    last_outcome: r.outcome,
    updated_at: new Date(r.at.getTime() + r.durationMs),
  };
}

/**
 * Writes the delivery's new state if we still hold the claim we sent under:
 * our claim number, or a later one of our own process (the lease keeper's
 * extension may have landed on the delivery a moment before our copy learnt
 * its number; this process never claims a delivery it still holds, so a
 * later claim of ours is that extension). Where conditional updates are
 * atomic (MongoDB), that is one update filtered on `{_id, claim_seq}` (and
 * the owner), served by the `_id` index. On FerretDB the claim is checked by
 * a read, then the write is by `_id` alone: `_id` equality is the only
 * filter FerretDB answers from an index (the combined filter read and
 * decoded the whole deliveries collection for every attempt, the delivery
 * benchmark's bottleneck), and its conditional update is a read then a write
 * anyway. The price there is a gap of one round trip in which a holder whose
 * lease already ran out could still write; the worst it can do is what an
 * unfenced write does: put a delivery that another holder just finished
 * back to pending (sent once more) or label it with its own outcome.
 * Nothing is lost either way.
 */
export async function recordStateOf(c: DeliveryCollections, r: AttemptRecord): Promise<void> {
  // r.delivery is the dispatcher's held copy: its claim_seq is the latest extension of our lease.
  const [fence, update] = deliveryUpdate(r);
  const owner = r.delivery.lease_owner;
  if (await atomicWrites(c)) {
    const ours = owner === null ? fence : { _id: fence._id, $or: [{ claim_seq: fence.claim_seq }, { lease_owner: owner, claim_seq: { $gt: fence.claim_seq } }] };
    await c.deliveries.updateOne(ours, update);
    return;
  }
  const current = await c.deliveries.findOne({ _id: fence._id }, { projection: { claim_seq: 1, lease_owner: 1 } });
  if (!current) return; // gone (its subscription was deleted)
  const ours = current.claim_seq === fence.claim_seq || (owner !== null && current.lease_owner === owner && current.claim_seq > fence.claim_seq);
  if (!ours) return; // claimed by another since: theirs to record
  await c.deliveries.updateOne({ _id: fence._id }, update);
}

function nextAttemptOf(r: AttemptRecord): Date | null {
  return r.outcome === 'ok' ? null : r.nextAttemptAt;
}

export function attemptDoc(r: AttemptRecord, attemptId: string): AttemptDoc {
  const d = r.delivery;
  const doc: AttemptDoc = {
    _id: attemptId,
    delivery_id: d._id,
    subscription_id: d.subscription_id,
    account_id: d.account_id,
    event_id: d.event_id,
    event_type: d.event_type,
    attempt: r.attempt,
    status: r.status,
    outcome: r.outcome,
    error: r.error,
    duration_ms: r.durationMs,
    at: r.at,
    next_attempt_at: nextAttemptOf(r),
  };
  // Only the API's operations set a trigger; the delivery process's own deliveries read as `event`.
  if (d.trigger !== undefined && d.trigger !== 'event') doc.trigger = d.trigger;
  return doc;
}

/** The delivery's new state, only while we still hold it (its claim_seq unchanged): [filter, update]. */
export function deliveryUpdate(r: AttemptRecord): [{ _id: string; claim_seq: number }, UpdateFilter<DeliveryDoc>] {
  return [{ _id: r.delivery._id, claim_seq: r.delivery.claim_seq }, { $set: stateAfter(r) }];
}

/**
 * One write per subscription: its attempt that started last. Attempts of one
 * subscription run concurrently, so the stored last_delivery_at guards against
 * an earlier-started attempt overwriting a later one from another flush.
 */
export function subscriptionUpdates(records: AttemptRecord[]): [Filter<WebhookStatusDoc> & { _id: string }, StatusUpdate][] {
  return latestPerSubscription(records).map(subscriptionUpdate);
}

type StatusUpdate = { $set: Omit<WebhookStatusDoc, '_id'> } & Omit<FailingUpdate, '$set'>;

function subscriptionUpdate(r: AttemptRecord): [Filter<WebhookStatusDoc> & { _id: string }, StatusUpdate] {
  return [
    { _id: r.delivery.subscription_id, last_delivery_at: { $lte: r.at } },
    { $set: { last_status: r.status, last_delivery_at: r.at, last_error: r.status === null ? r.outcome : null } },
  ];
}

/**
 * The guarded update; when it matches nothing, the status document may not
 * exist yet: insert it. A concurrent insert wins the _id: then the guarded
 * update is tried once more (it applies only if ours is the later attempt).
 */
async function writeStatus(c: DeliveryCollections, filter: Filter<WebhookStatusDoc> & { _id: string }, update: StatusUpdate): Promise<void> {
  const res = await c.webhookStatus.updateOne(filter, update);
  if (res.matchedCount > 0) return;
  try {
    await c.webhookStatus.insertOne({ _id: filter._id, ...update.$set, ...update.$min });
  } catch (err) {
    if ((err as { code?: number }).code !== DUPLICATE_KEY) throw err;
    await c.webhookStatus.updateOne(filter, update);
  }
}
