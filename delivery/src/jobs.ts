/**
 * The job lifecycle: what the dispatcher holds, and how each kind of job is
 * finished or handed back.
 *
 * Two kinds of job:
 * - a log job, read from the log by the consumer: it holds no lease (its
 *   partition is this process's alone) and is in no store. Finishing it
 *   (sent and recorded, or dropped) calls its `done`, and the consumer's
 *   offsets move past it. Handing it back writes it to the retry store,
 *   unleased and due now, and finishes it once it is there.
 * - a store job, claimed from the retry store (retry scheduler, ordered
 *   queue): it holds a lease. Finishing it lets its ordered queue, if any, go
 *   on; handing it back releases its lease for a poller to claim later.
 *
 * A log job that arrives while the same delivery is already held here (the
 * log read again after a rebalance) is attached to it: finished when the one
 * held is.
 */
import type { Logger } from '#shared/log.js';
import type { DeliveryDoc } from '#shared/mongo/index.js';

interface JobBase {
  delivery: DeliveryDoc;
  /** The subscription's `rate_limit` as the consumer read it (null: unlimited); the pre-send read updates it. */
  rateLimit?: number | null;
}

/** A delivery read from the log; `done` lets the consumer's offsets move past it. */
export interface LogJob extends JobBase {
  source: 'log';
  done: () => void;
}

/** A delivery claimed from the retry store, under its lease. */
export interface StoreJob extends JobBase {
  source: 'store';
}

export type Job = LogJob | StoreJob;

export function logJob(delivery: DeliveryDoc, done: () => void, rateLimit?: number | null): LogJob {
  return rateLimit === undefined ? { source: 'log', delivery, done } : { source: 'log', delivery, done, rateLimit };
}

export function storeJob(delivery: DeliveryDoc): StoreJob {
  return { source: 'store', delivery };
}

/** The store writes a hand-back makes. */
export interface JobStore {
  /** Releases the leases of deliveries this process holds (deliveries.ts releaseLeases). */
  release(ids: string[]): Promise<void>;
  /** Writes log deliveries to the retry store, unleased and due now, until it lands (those already there are left alone). */
  insertUnleased(docs: DeliveryDoc[]): Promise<void>;
}

export class Jobs {
  /** Ids queued or in flight here: a delivery is never run twice at once in one process. */
  private readonly held = new Set<string>();
  /** `done` of log jobs that arrived while the same delivery was already held here. */
  private readonly attached = new Map<string, (() => void)[]>();
  /** Background writes not finished yet (hand-backs, ordered appends) plus jobs running. */
  private pending = 0;
  /** This process's appends to ordered queues, one after another (in the log's order). */
  private fifoWrites: Promise<void> = Promise.resolve();
  /** Told when a `fifo` subscription's delivery held here is finished or its queue was appended to. */
  onFifoReady?: (subscriptionId: string) => void;

  constructor(
    private readonly store: JobStore,
    private readonly log: Logger,
  ) {}

  holds(id: string): boolean {
    return this.held.has(id);
  }

  hold(job: Job): void {
    this.held.add(job.delivery._id);
  }

  /** A log job of a delivery already held: finished when that one is. */
  attach(job: LogJob): void {
    const list = this.attached.get(job.delivery._id) ?? [];
    list.push(job.done);
    this.attached.set(job.delivery._id, list);
  }

  /** Jobs running plus background writes not finished yet. */
  get unsettled(): number {
    return this.pending;
  }

  /** Counts work until `settle` (a job running, a background write). */
  begin(): void {
    this.pending++;
  }

  settle(): void {
    this.pending--;
  }

  /** The job ran here and is over: no longer held, and finished. */
  end(job: Job): void {
    this.held.delete(job.delivery._id);
    this.finish(job);
  }

  /** Finished by its kind, with any job attached to it. */
  finish(job: Job): void {
    if (job.source === 'log') job.done();
    else if (job.delivery.fifo) this.onFifoReady?.(job.delivery.subscription_id);
    const waiting = this.attached.get(job.delivery._id);
    if (!waiting) return;
    this.attached.delete(job.delivery._id);
    for (const done of waiting) done();
  }

  /** Queued jobs not sent here: each back where it came from, in the background. */
  handBack(jobs: Job[]): void {
    for (const j of jobs) this.held.delete(j.delivery._id);
    const { log, store } = bySource(jobs);
    if (store.length > 0) {
      this.begin();
      this.releaseNow(store)
        .catch((err: unknown) => this.log.warn({ err }, 'could not hand queued deliveries back; their leases will expire'))
        .finally(() => this.settle());
    }
    this.storeLogJobs(log);
  }

  /** Store jobs' leases released now (at shutdown, awaited). */
  releaseNow(jobs: StoreJob[]): Promise<void> {
    for (const j of jobs) this.held.delete(j.delivery._id);
    return jobs.length === 0 ? Promise.resolve() : this.store.release(jobs.map((j) => j.delivery._id));
  }

  /** Log jobs into the retry store in the background (one insertMany), each finished once it is there. */
  storeLogJobs(jobs: LogJob[]): void {
    if (jobs.length === 0) return;
    this.begin();
    this.store
      .insertUnleased(jobs.map((j) => j.delivery))
      .then(() => jobs.forEach((j) => this.finish(j)))
      .catch((err: unknown) => this.log.warn({ err }, 'could not hand queued deliveries to the store; the log will be read again from before them'))
      .finally(() => this.settle());
  }

  /**
   * Log jobs of `fifo` subscriptions: appended to their queues (one write
   * after another, so in the log's order), each finished once stored, then
   * each queue is stepped.
   */
  storeFifo(jobs: LogJob[]): void {
    if (jobs.length === 0) return;
    this.begin();
    const docs = jobs.map((j) => j.delivery);
    this.fifoWrites = this.fifoWrites
      .then(() => this.store.insertUnleased(docs))
      .then(() => {
        jobs.forEach((j) => this.finish(j));
        for (const s of new Set(docs.map((d) => d.subscription_id))) this.onFifoReady?.(s);
      })
      .catch((err: unknown) => this.log.warn({ err }, 'could not append deliveries to their ordered queues; the log will be read again from before them'))
      .finally(() => this.settle());
  }
}

export function bySource(jobs: Job[]): { log: LogJob[]; store: StoreJob[] } {
  const log: LogJob[] = [];
  const store: StoreJob[] = [];
  for (const j of jobs) {
    if (j.source === 'log') log.push(j);
    else store.push(j);
  }
  return { log, store };
}
