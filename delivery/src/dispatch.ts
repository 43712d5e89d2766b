/**
 * The delivery pipeline, stage by stage, for one job (jobs.ts: a log job or
 * a store job):
 *   intake (consumer.ts, retry-scheduler.ts, fifo.ts: `enqueue`) →
 *   admission (admission.ts: a free slot, the subscription's share, its
 *   token) → attempt (attempt.ts: read under the fence, sign, send) →
 *   record (recorder.ts, endpoint-health.ts) → finish or hand back (jobs.ts;
 *   a failure is stored for the retry scheduler by the recorder).
 *
 * Each attempt runs on its own, so a receiver that hangs for the full 4 s
 * holds one slot and nothing else: other receivers' deliveries and the
 * consumer's next batch go on meanwhile. The slot is the HTTP attempt only:
 * the record is written outside it, so a slow store delays records, not the
 * next attempts. From the claim until its record is written, a store job's
 * lease is kept alive (lease-keeper.ts), and the scheduler skips what this
 * process holds.
 */
import { Admission, type Admitted, type AdmissionLimits } from './admission.js';
import { releaseLeases, storeUnleased } from './deliveries.js';
import { Jobs, bySource, type Job, type LogJob } from './jobs.js';
import { JobRunner, type DispatchDeps } from './run-job.js';

/** 'attached': a log job of a delivery already held here; it is finished when that one is. */
type Enqueued = 'queued' | 'duplicate' | 'full' | 'attached';

/** At shutdown, how long the records of finished attempts may take to be written. */
const RECORD_FLUSH_MS = 8000;

async function waitUntil(done: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!done() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
}

export class Dispatcher {
  private readonly admission: Admission<Job>;
  private readonly jobs: Jobs;
  private readonly runner: JobRunner;
  private stopped = false;
  /** Wakes the pump when a rate-limited subscription's next token is due. */
  private rateTimer: NodeJS.Timeout | null = null;
  private rateTimerAt = 0;

  constructor(
    private readonly deps: DispatchDeps,
    private readonly limits: AdmissionLimits,
  ) {
    this.admission = new Admission<Job>(limits);
    this.jobs = new Jobs({ release: (ids) => releaseLeases(deps.collections, ids, deps.owner, deps.clock()), insertUnleased: (docs) => storeUnleased(deps.collections, docs, deps.log) }, deps.log);
    this.runner = new JobRunner(deps, this.admission, this.jobs);
  }

  /** Told when a `fifo` subscription's delivery held here is finished or its queue was appended to (worker.ts: steps the queue). */
  set onFifoReady(fn: ((subscriptionId: string) => void) | undefined) {
    this.jobs.onFifoReady = fn;
  }

  /** True while this process has the delivery queued, sending, or recording its outcome. */
  holds(id: string): boolean {
    return this.jobs.holds(id);
  }

  /**
   * True when the subscription has attempts running and none of its
   * attempts started or finished for `ms`: likely hanging, before its first
   * timeout (4 s) cuts its cap. Work waiting for a free slot of the process
   * does not count: that is contention, not a hang.
   */
  isStalled(subscriptionId: string, ms: number): boolean {
    return this.admission.isStalled(subscriptionId, ms);
  }

  /** True when the subscription's cap was cut (its attempts hang or cannot connect): its overflow waits in the store. */
  isSlowed(subscriptionId: string): boolean {
    return this.admission.isSlowed(subscriptionId);
  }

  /**
   * How many more deliveries of `subscriptionId` may wait here (its waiting
   * room follows its AIMD cap; a rate-limited one's holds LIMITED_ROOM_S
   * seconds of its rate at most: the rest waits in the store, not in memory
   * that holds its partition's commit).
   */
  roomFor(subscriptionId: string): number {
    return this.stopped ? 0 : this.admission.roomFor(subscriptionId);
  }

  /**
   * About how many deliveries of the subscription this process takes per
   * second: its rate limit, or else its waiting room. The retry scheduler
   * spreads the subscription's deferred backlog by it.
   */
  paceOf(subscriptionId: string): number {
    return this.admission.paceOf(subscriptionId);
  }

  /** True when the subscription is rate-limited and its waiting room here is full (its overflow goes to the store at once). */
  isThrottled(subscriptionId: string): boolean {
    return this.admission.isLimited(subscriptionId) && this.roomFor(subscriptionId) === 0;
  }

  get concurrency(): number {
    return this.limits.concurrency;
  }

  get inFlight(): number {
    return this.admission.inFlight;
  }

  /** Work waiting, sending or still writing its outcome here. */
  get load(): number {
    return this.jobs.unsettled + this.admission.waiting;
  }

  /** Work waiting or sending here (what occupies slots; records being written do not). */
  get backlog(): number {
    return this.admission.inFlight + this.admission.waiting;
  }

  /** Attempts sent whose records (or other bookkeeping) are still being written. */
  get recording(): number {
    return Math.max(0, this.jobs.unsettled - this.admission.inFlight);
  }

  /**
   * Slots free right now (the poller claims no more than this). Records still
   * being written take no slot: a slow store delays the records, not the next
   * attempts (the lease keeper holds their deliveries meanwhile).
   */
  get room(): number {
    return this.stopped ? 0 : this.admission.freeSlots;
  }

  /**
   * 'full' when the subscription already has plenty waiting here: the caller
   * hands the delivery back (releaseLeases) for a poller to claim later.
   */
  enqueue(job: Job): Enqueued {
    if (this.stopped) return job.source === 'log' ? 'full' : 'duplicate';
    if (this.jobs.holds(job.delivery._id)) {
      if (job.source === 'store') return 'duplicate';
      // Already here (the log was read again after a rebalance): finished when that one is.
      this.jobs.attach(job);
      return 'attached';
    }
    if (job.rateLimit !== undefined) this.admission.setRate(job.delivery.subscription_id, job.rateLimit);
    if (!this.admission.push(job.delivery.subscription_id, job)) return 'full';
    this.jobs.hold(job);
    this.pump();
    return 'queued';
  }

  /**
   * Log jobs that get no room here (a slowed-down subscription's overflow):
   * written to the store in the background, each finished once it is there.
   * The consumer goes on reading meanwhile.
   */
  storeOverflow(jobs: LogJob[]): void {
    this.jobs.storeLogJobs(jobs);
  }

  /**
   * Log jobs of `fifo` subscriptions: appended to their queues in the log's
   * order, each finished once stored, then each queue is stepped. They are
   * never sent from here: the queue hands out its head (fifo.ts).
   */
  storeFifo(jobs: LogJob[]): void {
    this.jobs.storeFifo(jobs);
  }

  /**
   * Stops taking work, hands queued deliveries back, waits up to `timeoutMs`
   * for attempts in flight, then up to `flushMs` for their records: a record
   * written late is a success not sent twice after the restart.
   */
  async stop(timeoutMs: number, flushMs = RECORD_FLUSH_MS): Promise<void> {
    const { log } = this.deps;
    this.stopped = true;
    if (this.rateTimer) clearTimeout(this.rateTimer);
    this.rateTimer = null;
    const drained = bySource(this.admission.drain());
    await this.jobs.releaseNow(drained.store).catch((err: unknown) => log.warn({ err }, 'could not release queued deliveries; their leases will expire'));
    // Log jobs are in no store yet: they go there (due now), so the offsets can move past them.
    this.jobs.handBack(drained.log);
    await waitUntil(() => this.admission.inFlight === 0, timeoutMs);
    await waitUntil(() => this.jobs.unsettled === 0, flushMs);
    await this.runner.flushStatus();
    if (this.jobs.unsettled > 0) log.warn({ pending: this.jobs.unsettled }, 'stopped with attempt records unwritten; their deliveries are retried once their leases run out');
    // The lease keeper ran until the records were written.
    this.runner.stopLeases();
  }

  /** Starts every job admission lets take a slot now. */
  private pump(): void {
    while (!this.stopped) {
      const { admitted, wakeIn } = this.admission.next();
      if (admitted) {
        this.start(admitted);
        continue;
      }
      if (wakeIn !== null) this.wakeIn(wakeIn);
      return;
    }
  }

  /** Runs one admitted job; its slot is freed once its attempt is over, its job finished once recorded. */
  private start({ item: job, key, gated }: Admitted<Job>): void {
    let slotFreed = false;
    const freeSlot = (): void => {
      if (slotFreed) return;
      slotFreed = true;
      this.admission.release(key);
      this.pump();
    };
    this.jobs.begin();
    this.runner
      .run(job, gated, freeSlot)
      .then(
        () => this.jobs.end(job),
        (err: unknown) => this.failed(job, err),
      )
      .finally(() => {
        freeSlot();
        this.jobs.settle();
      });
  }

  /** A job whose run threw: a store job's lease runs out (then retried); a log job goes to the store (due now). */
  private failed(job: Job, err: unknown): void {
    if (job.source === 'store') {
      this.deps.log.error({ err, delivery: job.delivery._id }, 'delivery attempt failed unexpectedly; its lease will expire and it will be retried');
      this.jobs.end(job);
      return;
    }
    // Not finished: the store's writes are retried until they land.
    this.deps.log.error({ err, delivery: job.delivery._id }, 'fresh delivery failed unexpectedly; handing it to the retry store');
    this.jobs.handBack([job]);
  }

  /** Deliveries wait for a rate-limited subscription's token: pump again when it is due. */
  private wakeIn(wait: number): void {
    const at = Date.now() + wait;
    if (this.rateTimer && this.rateTimerAt <= at) return;
    if (this.rateTimer) clearTimeout(this.rateTimer);
    this.rateTimerAt = at;
    this.rateTimer = setTimeout(() => {
      this.rateTimer = null;
      this.pump();
    }, wait);
  }
}
