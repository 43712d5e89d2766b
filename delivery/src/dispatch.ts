/**
 * Sends attempts with bounded concurrency. Each attempt runs on its own, so a
 * receiver that hangs for the full 4 s holds one slot and nothing else: other
 * receivers' deliveries and the consumer's next batch go on meanwhile. Slots
 * are shared out per subscription (round-robin, capped per subscription), so
 * one dead receiver with a backlog cannot take them all.
 *
 * From the claim until its record is written, a delivery's lease is kept
 * alive here (a record lagging behind a slow store must not let the lease run
 * out while the attempt is already sent: another claimer would send it
 * again), and the scheduler skips what this process holds. The subscription is
 * read right before each attempt, so a deleted or disabled subscription gets
 * nothing, a rotated secret signs the very next attempt (with the replaced
 * one beside it until its grace period ends) and a changed url is where it
 * goes.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from '#shared/log.js';
import type { DeliveryDoc, WebhookDoc } from '#shared/mongo/index.js';
import type { SecretBox } from '#shared/secrets.js';
import { signDelivery } from '#shared/signing.js';
import { SEND_READ_MAX_AGE_MS, sendingState } from '#shared/subscription-fence.js';
import { headersAad, maySet } from '#shared/webhook-headers.js';
import { ATTEMPT_TIMEOUT_MS } from './config.js';
import { withTimeout } from '#shared/timeout.js';
import { bucketLeaseChecks, claim, dropDelivery, giveUpDisabled, isGiveUp, predatesEnabling, releaseLeases, renewClaim, takesEventType, type AttemptRecord, type DeliveryCollections } from './deliveries.js';
import { insertDeliveries } from '#shared/mongo/delivery-queue.js';
import type { Sender, SendGate } from './http-sender.js';
import { AttemptRecorder } from './recorder.js';
import type { EndpointHealth } from './endpoint-health.js';
import { FairQueue } from './fair-queue.js';
import { LIMITED_ROOM_S, RateLimiter } from './rate-limit.js';
import { isPermanentFailure, nextDelay } from './retry-policy.js';
import { SubscriptionReads } from './subscription-reads.js';
import type { SubscriptionTable } from './subscription-table.js';

interface DispatchDeps {
  log: Logger;
  collections: DeliveryCollections;
  sender: Sender;
  box: SecretBox;
  owner: string;
  leaseMs: number;
  retrySchedule: number[];
  clock: () => Date;
  /** Told of every attempt once sent (metrics). */
  onAttempt?: (attempt: AttemptRecord) => void;
  /** Told of a delivery given up unsent because its subscription is disabled (metrics; attempts that give up are told through onAttempt). */
  onGivenUpDisabled?: () => void;
  /**
   * Awaited (at most GIVEN_UP_WAIT_MS) after an attempt that gives its delivery up and before its record:
   * the operational notification is produced first, so no crash between the two loses it.
   */
  onGivenUp?: (attempt: AttemptRecord) => Promise<void>;
  /** Disables subscriptions whose attempts all fail for its period (fed by the recorder's status writes). */
  health?: EndpointHealth;
  hooks?: DispatchHooks;
  /** Subscriptions in memory: the pre-send read comes from it while its latest load is recent enough (subscription-table.ts). */
  table?: SubscriptionTable;
}

export interface Job {
  delivery: DeliveryDoc;
  /**
   * Set for a delivery read from the log and not in the store: it holds no
   * lease (its partition is this process's alone) and `done` is called once
   * it is finished (sent and recorded, handed to the retry store, or dropped
   * because its subscription is gone or disabled): the consumer's offsets
   * move past it then.
   */
  fresh?: { done: () => void };
  /** The subscription's `rate_limit` as the consumer read it (null: unlimited); the pre-send read updates it. */
  rateLimit?: number | null;
}

/** Test hooks: force rare timings (a record that lags behind its attempt). */
export interface DispatchHooks {
  /** Awaited after an attempt is sent and before its record is handed to the recorder. */
  beforeRecord?: (attempt: AttemptRecord) => Promise<void>;
  /** Awaited after its record is written, while the delivery is still held here (a flush whose other writes are slow). */
  afterRecord?: (attempt: AttemptRecord) => Promise<void>;
}

/** How long a give-up's record waits for its notification (a log that is down does not hold the record longer). */
const GIVEN_UP_WAIT_MS = 5000;

/** Renew the lease before sending unless this much of it is left. */
const LEASE_MARGIN_MS = ATTEMPT_TIMEOUT_MS + 5000;

interface DispatcherLimits {
  /** Attempts in flight in this process. */
  concurrency: number;
  /** Attempts in flight to one subscription. */
  perSubscription: number;
}

/** 'attached': a fresh delivery already held here; it is finished when that one is. */
type Enqueued = 'queued' | 'duplicate' | 'full' | 'attached';

/** At shutdown, how long the records of finished attempts may take to be written. */
const RECORD_FLUSH_MS = 8000;

async function waitUntil(done: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!done() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
}

/** Attempts in flight at once to a subscription seen for the first time; one more per attempt that goes well. */
const SLOW_START = 4;

/** Outcomes of attempts that held their slot for the whole timeout or never reached the receiver. */
const SLOW_OUTCOMES = new Set(['timeout', 'connect']);

export class Dispatcher {
  private readonly queue: FairQueue<Job>;
  /** Writes attempt outcomes in batches: one flush at a time, the next takes all that finished meanwhile. */
  private readonly recorder: AttemptRecorder;
  /** Ids queued or in flight here: a delivery is never run twice at once in one process. */
  private readonly held = new Set<string>();
  /** Attempts holding a slot (sending). */
  private running = 0;
  /** Jobs not finished yet: sending or writing their outcome. */
  private bookkeeping = 0;
  private stopped = false;
  /** Deliveries claimed here whose attempt or record is pending, as held now (the lease keeper updates them). */
  private readonly active = new Map<string, DeliveryDoc>();
  private readonly extending = new Set<string>();
  private keeper: NodeJS.Timeout | null = null;
  /** `done` of fresh jobs that arrived while the same delivery was already held here (a re-read of the log). */
  private readonly waiters = new Map<string, (() => void)[]>();
  /** The read of each subscription right before sending, shared by the sends waiting for it. */
  readonly subscriptions: SubscriptionReads;
  /** When an attempt of each subscription last started or finished. */
  private readonly activity = new Map<string, number>();
  /** Token buckets of rate-limited subscriptions (rate-limit.ts). */
  private readonly limiter = new RateLimiter();
  /** Wakes the pump when a rate-limited subscription's next token is due. */
  private rateTimer: NodeJS.Timeout | null = null;
  private rateTimerAt = 0;
  /** Signing secrets, decrypted once each. */
  private readonly secrets: OpenedSecrets;
  /** Told when a `fifo` subscription's delivery held here is finished or its queue was appended to (worker.ts: steps the queue). */
  onFifoReady?: (subscriptionId: string) => void;
  /** This process's appends to ordered queues, one after another (in the log's order). */
  private fifoWrites: Promise<void> = Promise.resolve();

  constructor(
    private readonly deps: DispatchDeps,
    private readonly limits: DispatcherLimits,
  ) {
    this.queue = new FairQueue<Job>(limits.perSubscription, limits.perSubscription * 4, Math.min(SLOW_START, limits.perSubscription));
    this.recorder = new AttemptRecorder(deps.collections, deps.log, deps.health);
    this.subscriptions = new SubscriptionReads((id) => deps.collections.webhooks.findOne({ _id: id }));
    this.secrets = new OpenedSecrets(deps.box);
  }

  /** True while this process has the delivery queued, sending, or recording its outcome. */
  holds(id: string): boolean {
    return this.held.has(id);
  }

  /**
   * True when the subscription has attempts running and none of its
   * attempts started or finished for `ms`: likely hanging, before its first
   * timeout (4 s) cuts its cap. Work waiting for a free slot of the process
   * does not count: that is contention, not a hang.
   */
  isStalled(subscriptionId: string, ms: number): boolean {
    if (this.queue.runningOf(subscriptionId) === 0) return false;
    return Date.now() - (this.activity.get(subscriptionId) ?? 0) >= ms;
  }

  /** True when the subscription's cap was cut (its attempts hang or cannot connect): its overflow waits in the store. */
  isSlowed(subscriptionId: string): boolean {
    return this.queue.capOf(subscriptionId) < this.limits.perSubscription;
  }

  /**
   * How many more deliveries of `subscriptionId` may wait here (its waiting
   * room follows its AIMD cap; a rate-limited one's holds LIMITED_ROOM_S
   * seconds of its rate at most: the rest waits in the store, not in memory
   * that holds its partition's commit).
   */
  roomFor(subscriptionId: string): number {
    if (this.stopped) return 0;
    const room = this.queue.roomOf(subscriptionId);
    const rate = this.limiter.rateOf(subscriptionId);
    if (rate === null) return room;
    return Math.min(room, Math.max(0, Math.max(1, Math.ceil(rate * LIMITED_ROOM_S)) - this.queue.queuedOf(subscriptionId)));
  }

  /**
   * About how many deliveries of the subscription this process takes per
   * second: its rate limit, or else its waiting room. The retry scheduler
   * spreads the subscription's deferred backlog by it.
   */
  paceOf(subscriptionId: string): number {
    const rate = this.limiter.rateOf(subscriptionId);
    return rate === null ? this.queue.queueLimitOf(subscriptionId) : Math.max(1, Math.ceil(rate));
  }

  /** True when the subscription is rate-limited and its waiting room here is full (its overflow goes to the store at once). */
  isThrottled(subscriptionId: string): boolean {
    return this.limiter.rateOf(subscriptionId) !== null && this.roomFor(subscriptionId) === 0;
  }

  get concurrency(): number {
    return this.limits.concurrency;
  }

  get inFlight(): number {
    return this.running;
  }

  /** Work waiting, sending or still writing its outcome here. */
  get load(): number {
    return this.bookkeeping + this.queue.size;
  }

  /** Work waiting or sending here (what occupies slots; records being written do not). */
  get backlog(): number {
    return this.running + this.queue.size;
  }

  /** Attempts sent whose records (or other bookkeeping) are still being written. */
  get recording(): number {
    return Math.max(0, this.bookkeeping - this.running);
  }

  /**
   * Slots free right now (the poller claims no more than this). Records still
   * being written take no slot: a slow store delays the records, not the next
   * attempts (the lease keeper holds their deliveries meanwhile).
   */
  get room(): number {
    return this.stopped ? 0 : Math.max(0, this.limits.concurrency - this.backlog);
  }

  /**
   * 'full' when the subscription already has plenty waiting here: the caller
   * hands the delivery back (releaseLeases) for a poller to claim later.
   */
  enqueue(job: Job): Enqueued {
    if (job.fresh) {
      if (this.stopped) return 'full';
      if (this.held.has(job.delivery._id)) {
        // Already here (the log was read again after a rebalance): finished when that one is.
        const list = this.waiters.get(job.delivery._id) ?? [];
        list.push(job.fresh.done);
        this.waiters.set(job.delivery._id, list);
        return 'attached';
      }
    }
    if (this.stopped || this.held.has(job.delivery._id)) return 'duplicate';
    if (job.rateLimit !== undefined) this.limiter.set(job.delivery.subscription_id, job.rateLimit);
    if (!this.queue.push(job.delivery.subscription_id, job)) return 'full';
    this.held.add(job.delivery._id);
    this.pump();
    return 'queued';
  }

  /**
   * Stops taking work, hands queued deliveries back, waits up to `timeoutMs`
   * for attempts in flight, then up to `flushMs` for their records: a record
   * written late is a success not sent twice after the restart.
   */
  async stop(timeoutMs: number, flushMs = RECORD_FLUSH_MS): Promise<void> {
    this.stopped = true;
    if (this.rateTimer) clearTimeout(this.rateTimer);
    this.rateTimer = null;
    const drained = this.queue.drain();
    const queued = drained.filter((j) => !j.fresh).map((j) => j.delivery._id);
    for (const id of queued) this.held.delete(id);
    await releaseLeases(this.deps.collections, queued, this.deps.owner, this.deps.clock()).catch((err: unknown) =>
      this.deps.log.warn({ err }, 'could not release queued deliveries; their leases will expire'),
    );
    // Fresh ones are in no store yet: they go there (due now), so the offsets can move past them.
    this.handBack(drained.filter((j) => j.fresh));
    await waitUntil(() => this.running === 0, timeoutMs);
    await waitUntil(() => this.bookkeeping === 0, flushMs);
    await this.recorder.flushStatus().catch((err: unknown) => this.deps.log.warn({ err }, 'could not write the last delivery status of subscriptions'));
    if (this.bookkeeping > 0) this.deps.log.warn({ pending: this.bookkeeping }, 'stopped with attempt records unwritten; their deliveries are retried once their leases run out');
    // The lease keeper ran until the records were written.
    if (this.keeper) clearInterval(this.keeper);
    this.keeper = null;
  }

  private pump(): void {
    while (!this.stopped && this.running < this.limits.concurrency) {
      // A rate-limited subscription without a token is passed over (its deliveries wait, in order).
      let tokenDue = Infinity;
      const next = this.queue.take((key) => {
        const wait = this.limiter.waitOf(key);
        if (wait > 0) tokenDue = Math.min(tokenDue, wait);
        return wait === 0;
      });
      if (!next) {
        if (tokenDue !== Infinity) this.wakeIn(tokenDue);
        return;
      }
      const { key, item: job } = next;
      // Its token, taken now; a delivery of a subscription whose limit is not known here yet waits for one after the read.
      const gated = this.limiter.rateOf(key) !== null;
      if (gated) this.limiter.take(key);
      this.running++;
      this.activity.set(key, Date.now());
      let slotFreed = false;
      // The slot is the HTTP attempt; the bookkeeping writes after it run outside the
      // slot, so a slow database does not slow a receiver's next delivery.
      const freeSlot = (): void => {
        if (slotFreed) return;
        slotFreed = true;
        this.running--;
        this.queue.done(key);
        this.pump();
      };
      this.bookkeeping++;
      this.run(job, freeSlot, gated)
        .then(
          () => {
            this.held.delete(job.delivery._id);
            this.finished(job);
          },
          (err: unknown) => {
            this.held.delete(job.delivery._id);
            if (!job.fresh) {
              this.deps.log.error({ err, delivery: job.delivery._id }, 'delivery attempt failed unexpectedly; its lease will expire and it will be retried');
              this.finished(job);
              return;
            }
            // Not finished: it goes to the store (due now), whose writes are retried until they land.
            this.deps.log.error({ err, delivery: job.delivery._id }, 'fresh delivery failed unexpectedly; handing it to the retry store');
            this.handBack([job]);
          },
        )
        .finally(() => {
          freeSlot();
          this.settle();
        });
    }
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

  /**
   * After the pre-send read: the subscription's limit as now stored. A
   * delivery taken before this process knew of a limit waits for its token
   * here (holding its slot; at most the few taken before the first read).
   */
  private async admit(sub: WebhookDoc, gated: boolean): Promise<void> {
    this.limiter.set(sub._id, sub.rate_limit);
    if (gated || this.limiter.rateOf(sub._id) === null) return;
    for (let wait = this.limiter.waitOf(sub._id); wait > 0; wait = this.limiter.waitOf(sub._id)) await new Promise((r) => setTimeout(r, wait));
    this.limiter.take(sub._id);
  }

  /** A fresh job (and any copy of it that arrived meanwhile) is finished; a stored one of an ordered queue lets its queue go on. */
  private finished(job: Job): void {
    if (!job.fresh && job.delivery.fifo) this.onFifoReady?.(job.delivery.subscription_id);
    job.fresh?.done();
    const waiting = this.waiters.get(job.delivery._id);
    if (!waiting) return;
    this.waiters.delete(job.delivery._id);
    for (const done of waiting) done();
  }

  /**
   * Reads the subscription and sends one attempt under that read. The
   * request is written only under a read that started at most
   * SEND_READ_MAX_AGE_MS before (shared/src/subscription-fence.ts): after a
   * slow DNS answer, connect or handshake the subscription is read again,
   * and a request prepared under a state that changed meanwhile (deleted,
   * disabled, another URL or secret, an events list without this type) is
   * dropped unwritten and, unless the subscription is gone, disabled or no
   * longer takes the type, prepared again under the new state.
   */
  private async attempt(delivery: DeliveryDoc, gated: boolean): Promise<{ kind: 'gone' } | { kind: 'disabled' } | { kind: 'sent'; outcome: AttemptRecord }> {
    for (let admitted = false; ; ) {
      const read = await this.readForSend(delivery.subscription_id, delivery.event_type);
      let asked = read.asked;
      const sub = read.sub;
      // Deleted, or no longer taking this event type (PATCH events): dropped unsent.
      if (!sub || !takesEventType(sub, delivery.event_type)) return { kind: 'gone' };
      // Disabled, or re-enabled since this delivery's event occurred: given up unsent.
      if (sub.enabled === false || predatesEnabling(sub, delivery)) return { kind: 'disabled' };
      // Its rate limit (a token, waited for if need be) once per delivery, not per re-prepared request.
      if (!admitted) await this.admit(sub, gated);
      admitted = true;
      const state = sendingState(sub);
      const ready = (): boolean => performance.now() - asked <= SEND_READ_MAX_AGE_MS;
      const gate: SendGate = {
        ready,
        refresh: async (pending) => {
          while (!ready()) {
            // The attempt timed out while the store was too slow to answer a fresh read: stop reading.
            if (!pending()) return false;
            const again = await this.readForSend(delivery.subscription_id, delivery.event_type);
            asked = again.asked;
            if (!again.sub || sendingState(again.sub) !== state || !takesEventType(again.sub, delivery.event_type)) return false;
          }
          return true;
        },
      };
      const outcome = await send(this.deps, this.secrets, delivery, sub, gate);
      if (outcome) return { kind: 'sent', outcome };
    }
  }

  /**
   * The subscription as read by a query that started at `asked` (monotonic
   * ms; null: deleted): from the table when its latest load started at most
   * SEND_READ_MAX_AGE_MS ago and lets the send go ahead, else from the store,
   * by a read started now.
   */
  private async readForSend(id: string, eventType: string): Promise<{ sub: WebhookDoc | null; asked: number }> {
    const cached = this.deps.table?.forSend(id, eventType);
    if (cached) return cached;
    const asked = performance.now();
    return { sub: await this.subscriptions.read(id), asked };
  }

  /**
   * A delivery read from the log: no lease, no store until it fails. The
   * subscription is read right before sending all the same (a DELETE or
   * PATCH that returned before this point stops or changes the send).
   */
  private async runFresh(job: Job, freeSlot: () => void, gated: boolean): Promise<void> {
    const delivery = job.delivery;
    const tried = await this.attempt(delivery, gated);
    // Deleted or disabled: nothing is sent and nothing was stored.
    if (tried.kind !== 'sent') return;
    // If this cannot be written, the job is still finished only when it rejects: the
    // offsets stay below it and a restart sends it again.
    await this.afterSend(tried.outcome, freeSlot, true);
  }

  /** After an attempt: the subscription's pace, the slot freed, the attempt recorded. */
  private async afterSend(outcome: AttemptRecord, freeSlot: () => void, fresh = false): Promise<void> {
    const { deps } = this;
    const subscriptionId = outcome.delivery.subscription_id;
    const slow = SLOW_OUTCOMES.has(outcome.outcome);
    this.queue.observe(subscriptionId, slow);
    this.activity.set(subscriptionId, Date.now());
    if (slow) this.handBack(this.queue.trim(subscriptionId));
    freeSlot();
    deps.onAttempt?.(outcome);
    // Never rejects, and waits GIVEN_UP_WAIT_MS at most: the record goes ahead either way.
    if (deps.onGivenUp && isGiveUp(outcome)) await withTimeout(deps.onGivenUp(outcome), GIVEN_UP_WAIT_MS).catch(() => undefined);
    await deps.hooks?.beforeRecord?.(outcome);
    await this.recorder.record(outcome, 'att_' + randomBytes(12).toString('hex'), fresh);
    await deps.hooks?.afterRecord?.(outcome);
    deps.log.debug({ delivery: outcome.delivery._id, attempt: outcome.attempt, status: outcome.status, outcome: outcome.outcome, ms: outcome.durationMs }, 'delivery attempt');
  }

  private async run(job: Job, freeSlot: () => void, gated: boolean): Promise<void> {
    if (job.fresh) return this.runFresh(job, freeSlot, gated);
    const { deps } = this;
    let delivery = job.delivery;
    const now = deps.clock();
    if (!delivery.lease_until || delivery.lease_until.getTime() - now.getTime() < LEASE_MARGIN_MS) {
      // Waited long in the queue: take the next claim before sending. Losing it means
      // our lease ran out and another process has the delivery now.
      const renewed = await renewClaim(deps.collections, delivery, deps.owner, now, deps.leaseMs);
      if (!renewed) return;
      delivery = renewed;
    }
    // The copy the lease keeper updates in place: the record is fenced on its latest claim.
    const held: DeliveryDoc = { ...delivery };
    this.active.set(held._id, held);
    this.startKeeper();
    try {
      // Read now, not when the event was consumed: a DELETE that returned before this read stops the send.
      const tried = await this.attempt(held, gated);
      if (tried.kind === 'gone') {
        await dropDelivery(deps.collections, held);
        return;
      }
      // Likewise a PATCH enabled:false: given up unsent, not kept for a re-enabling.
      if (tried.kind === 'disabled') {
        if (await giveUpDisabled(deps.collections, held, deps.clock())) deps.onGivenUpDisabled?.();
        deps.log.debug({ delivery: held._id, subscription: held.subscription_id }, 'delivery given up: its subscription is disabled');
        return;
      }
      await this.afterSend(tried.outcome, freeSlot);
    } finally {
      this.active.delete(held._id);
    }
  }

  /**
   * Fresh deliveries that get no room here (a slowed-down subscription's
   * overflow): written to the store in the background, each finished once it
   * is there. The consumer goes on reading meanwhile.
   */
  storeOverflow(jobs: Job[]): void {
    this.storeFresh(jobs);
  }

  /**
   * Deliveries of `fifo` subscriptions, read from the log: appended to their
   * queues (one write after another, so in the log's order), each finished
   * once stored, then each queue is stepped. They are never sent from here:
   * the queue hands out its head (fifo.ts).
   */
  storeFifo(jobs: Job[]): void {
    if (jobs.length === 0) return;
    this.bookkeeping++;
    const docs = jobs.map((j) => j.delivery);
    this.fifoWrites = this.fifoWrites
      .then(() => storeUnleased(this.deps.collections, docs, this.deps.log))
      .then(() => {
        jobs.forEach((j) => this.finished(j));
        for (const s of new Set(docs.map((d) => d.subscription_id))) this.onFifoReady?.(s);
      })
      .catch((err: unknown) => this.deps.log.warn({ err }, 'could not append deliveries to their ordered queues; the log will be read again from before them'))
      .finally(() => this.settle());
  }

  /** Queued work of a subscription that just slowed down: back to the store, where it waits without holding memory here. */
  private handBack(jobs: Job[]): void {
    if (jobs.length === 0) return;
    for (const j of jobs) this.held.delete(j.delivery._id);
    const stored = jobs.filter((j) => !j.fresh).map((j) => j.delivery._id);
    const fresh = jobs.filter((j) => j.fresh);
    if (stored.length > 0) {
      this.bookkeeping++;
      releaseLeases(this.deps.collections, stored, this.deps.owner, this.deps.clock())
        .catch((err: unknown) => this.deps.log.warn({ err }, 'could not hand queued deliveries back; their leases will expire'))
        .finally(() => this.settle());
    }
    this.storeFresh(fresh);
  }

  private storeFresh(fresh: Job[]): void {
    if (fresh.length > 0) {
      this.bookkeeping++;
      // Into the store, unleased and due now, in one insertMany: the retry scheduler takes them from there.
      storeUnleased(this.deps.collections, fresh.map((j) => j.delivery), this.deps.log)
        .then(() => fresh.forEach((j) => this.finished(j)))
        .catch((err: unknown) => this.deps.log.warn({ err }, 'could not hand queued deliveries to the store; the log will be read again from before them'))
        .finally(() => this.settle());
    }
  }

  private settle(): void {
    this.bookkeeping--;
    if (this.activity.size > 10_000 && this.queue.size === 0 && this.running === 0) this.activity.clear();
  }

  private startKeeper(): void {
    if (this.keeper) return;
    this.keeper = setInterval(() => this.extendLeases(), Math.max(250, Math.floor(this.deps.leaseMs / 4)));
    this.keeper.unref();
  }

  /**
   * Extends the lease of every delivery whose attempt or record is pending
   * here and whose lease has less than half its length left. An extension is
   * the next claim (a unique insert), so it either wins against any other
   * claimer or tells us the lease is lost; the record is then fenced out.
   */
  private extendLeases(): void {
    const { deps } = this;
    if (this.active.size === 0 && this.keeper) {
      clearInterval(this.keeper);
      this.keeper = null;
      return;
    }
    const now = deps.clock();
    const due = [...this.active.values()].filter((held) => !this.extending.has(held._id) && held.lease_until && held.lease_until.getTime() - now.getTime() <= deps.leaseMs / 2);
    if (due.length === 0) return;
    for (const held of due) this.extending.add(held._id);
    // Their lease checks at the new ends first (one slot for all, not one per delivery), then the claims.
    bucketLeaseChecks(deps.collections, due, now, deps.leaseMs)
      .then(() => Promise.all(due.map((held) => this.extendOne(held, now))))
      .catch((err: unknown) => deps.log.warn({ err, deliveries: due.length }, 'could not extend delivery leases; will try again'))
      .finally(() => {
        for (const held of due) this.extending.delete(held._id);
      });
  }

  private async extendOne(held: DeliveryDoc, now: Date): Promise<void> {
    const { deps } = this;
    try {
      const renewed = await claim(deps.collections, held, deps.owner, now, deps.leaseMs);
      if (renewed) {
        Object.assign(held, { claim_seq: renewed.claim_seq, lease_owner: renewed.lease_owner, lease_until: renewed.lease_until });
        // The record finished while we extended: give the lease back so a due retry is not held up.
        if (!this.active.has(held._id)) await releaseLeases(deps.collections, [held._id], deps.owner, deps.clock());
      } else {
        held.lease_until = null; // lost: the record will be fenced out; stop trying
        deps.log.warn({ delivery: held._id }, 'lost the lease of a delivery whose attempt is pending; its record will not overwrite the new holder');
      }
    } catch (err) {
      deps.log.warn({ err, delivery: held._id }, 'could not extend a delivery lease; will try again');
    }
  }
}

/**
 * The secrets an attempt at `at` is signed with: the current one, then the
 * one a rotation replaced while its grace period lasts (never after).
 */
export function signingSecrets(box: Pick<SecretBox, 'open'>, sub: WebhookDoc, at: Date): string[] {
  const secrets = [box.open(sub.secret_enc, sub._id)];
  const until = sub.previous_secret_expires_at;
  if (sub.previous_secret_enc && until && until.getTime() > at.getTime()) secrets.push(box.open(sub.previous_secret_enc, sub._id));
  return secrets;
}

/**
 * SecretBox.open remembered per (sealed value, subscription): one AES-GCM
 * decryption per secret instead of one per attempt (~3% of a healthy
 * delivery's CPU in a profile). A rotation stores a new sealed value,
 * so the next attempt opens (and signs with) the new secret; a value that
 * does not open is never remembered and throws each time.
 */
export class OpenedSecrets {
  private readonly opened = new Map<string, string>();

  constructor(
    private readonly box: Pick<SecretBox, 'open'>,
    private readonly max = 10_000,
  ) {}

  open(sealed: string, associatedData: string): string {
    const key = associatedData + '\n' + sealed;
    let plain = this.opened.get(key);
    if (plain === undefined) {
      plain = this.box.open(sealed, associatedData);
      if (this.opened.size >= this.max) this.opened.clear();
      this.opened.set(key, plain);
    }
    return plain;
  }
}

/**
 * The subscription's custom headers as read for this send (a PATCH that
 * returned before the read applies, queued retries included); {} when none.
 */
function customHeaders(secrets: Pick<OpenedSecrets, 'open'>, sub: Pick<WebhookDoc, '_id' | 'headers_enc'>): Record<string, string> {
  if (!sub.headers_enc) return {};
  const stored = JSON.parse(secrets.open(sub.headers_enc, headersAad(sub._id))) as Record<string, string>;
  // The API refuses the service's own and hop-by-hop names; a document written otherwise gets none of them through.
  return Object.fromEntries(Object.entries(stored).filter(([name]) => maySet(name)));
}

/** One signed POST; returns what the recorder stores, next attempt time included. */
/** One attempt under `sub`, on the subscription's own connections; null when nothing was sent (the gate withheld the request, or no connection came free in time). */
async function send(deps: DispatchDeps, secrets: OpenedSecrets, delivery: DeliveryDoc, sub: WebhookDoc, gate: SendGate): Promise<AttemptRecord | null> {
  const at = deps.clock();
  const headers = {
    // First, so that nothing of the service's own is ever overridden (the API refuses those names anyway).
    ...customHeaders(secrets, sub),
    ...signDelivery(signingSecrets(secrets, sub, at), delivery._id, delivery.body, at),
    'X-Service-Event': delivery.event_type,
    'X-Service-Delivery': delivery._id,
  };
  const result = await deps.sender.send(sub.url, delivery.body, headers, { account: sub.account_id, subscription: sub._id }, gate);
  if (!result) return null;
  const number = delivery.attempts + 1;
  const delay = result.outcome === 'ok' || isPermanentFailure(result) ? null : nextDelay(number, deps.retrySchedule, result);
  const finished = new Date(at.getTime() + result.durationMs);
  return {
    delivery,
    attempt: number,
    status: result.status,
    outcome: result.outcome,
    error: result.error,
    durationMs: result.durationMs,
    at,
    nextAttemptAt: delay === null ? null : new Date(finished.getTime() + delay),
  };
}

/** Fresh deliveries into the store, unleased and due now; those already there are left alone. */
async function storeUnleased(c: DeliveryCollections, docs: DeliveryDoc[], log?: Logger): Promise<void> {
  if (docs.length === 0) return;
  const unleased = docs.map((d) => ({ ...d, lease_owner: null, lease_until: null }));
  // Until it lands: the consumer's offsets stay below these deliveries meanwhile, so giving
  // up would only mean reading (and sending) the log again from there after a restart.
  for (let tries = 1; ; tries++) {
    try {
      await insertDeliveries(c, unleased);
      return;
    } catch (err) {
      if (tries === 1 || tries % 30 === 0) log?.warn({ err, deliveries: docs.length, tries }, 'could not hand deliveries to the retry store; trying again');
      await new Promise((r) => setTimeout(r, Math.min(2000, 200 * tries)));
    }
  }
}
