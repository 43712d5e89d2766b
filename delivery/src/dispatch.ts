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
import type { Logger } from '../../shared/src/log.js';
import type { DeliveryDoc, WebhookDoc } from '../../shared/src/mongo/index.js';
import type { SecretBox } from '../../shared/src/secrets.js';
import { signDelivery } from '../../shared/src/signing.js';
import { ATTEMPT_TIMEOUT_MS } from './config.js';
import { claim, dropDelivery, giveUpDisabled, releaseLeases, type AttemptRecord, type DeliveryCollections } from './deliveries.js';
import type { Sender } from './http-sender.js';
import { AttemptRecorder } from './recorder.js';
import { FairQueue } from './fair-queue.js';
import { isPermanentFailure, nextDelay } from './retry-policy.js';

export interface DispatchDeps {
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
  hooks?: DispatchHooks;
}

export interface Job {
  delivery: DeliveryDoc;
}

/** Test hooks: force rare timings (a record that lags behind its attempt). */
export interface DispatchHooks {
  /** Awaited after an attempt is sent and before its record is handed to the recorder. */
  beforeRecord?: (attempt: AttemptRecord) => Promise<void>;
}

/** Renew the lease before sending unless this much of it is left. */
const LEASE_MARGIN_MS = ATTEMPT_TIMEOUT_MS + 5000;

export interface DispatcherLimits {
  /** Attempts in flight in this process. */
  concurrency: number;
  /** Attempts in flight to one subscription. */
  perSubscription: number;
}

export type Enqueued = 'queued' | 'duplicate' | 'full';

/** At shutdown, how long the records of finished attempts may take to be written. */
export const RECORD_FLUSH_MS = 8000;

async function waitUntil(done: () => boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!done() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
}

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

  constructor(
    private readonly deps: DispatchDeps,
    private readonly limits: DispatcherLimits,
  ) {
    this.queue = new FairQueue<Job>(limits.perSubscription, limits.perSubscription * 4);
    this.recorder = new AttemptRecorder(deps.collections, deps.log);
  }

  /** True while this process has the delivery queued, sending, or recording its outcome. */
  holds(id: string): boolean {
    return this.held.has(id);
  }

  /** True when the subscription's cap was cut (its attempts hang or cannot connect): its overflow waits in the store. */
  isSlowed(subscriptionId: string): boolean {
    return this.queue.capOf(subscriptionId) < this.limits.perSubscription;
  }

  /** How many more deliveries of `subscriptionId` may wait here (its waiting room follows its AIMD cap). */
  roomFor(subscriptionId: string): number {
    return this.stopped ? 0 : this.queue.roomOf(subscriptionId);
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

  /** Subscriptions with all their slots in use (the poller leaves their due work for later). */
  busySubscriptions(): string[] {
    return this.queue.busyKeys();
  }

  /**
   * 'full' when the subscription already has plenty waiting here: the caller
   * hands the delivery back (releaseLeases) for a poller to claim later.
   */
  enqueue(job: Job): Enqueued {
    if (this.stopped || this.held.has(job.delivery._id)) return 'duplicate';
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
    const queued = this.queue.drain().map((j) => j.delivery._id);
    for (const id of queued) this.held.delete(id);
    await releaseLeases(this.deps.collections, queued, this.deps.owner, this.deps.clock()).catch((err: unknown) =>
      this.deps.log.warn({ err }, 'could not release queued deliveries; their leases will expire'),
    );
    await waitUntil(() => this.running === 0, timeoutMs);
    await waitUntil(() => this.bookkeeping === 0, flushMs);
    if (this.bookkeeping > 0) this.deps.log.warn({ pending: this.bookkeeping }, 'stopped with attempt records unwritten; their deliveries are retried once their leases run out');
    // The lease keeper ran until the records were written.
    if (this.keeper) clearInterval(this.keeper);
    this.keeper = null;
  }

  private pump(): void {
    while (!this.stopped && this.running < this.limits.concurrency) {
      const next = this.queue.take();
      if (!next) return;
      const { key, item: job } = next;
      this.running++;
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
      this.run(job, freeSlot)
        .catch((err: unknown) => this.deps.log.error({ err, delivery: job.delivery._id }, 'delivery attempt failed unexpectedly; its lease will expire and it will be retried'))
        .finally(() => {
          freeSlot();
          this.held.delete(job.delivery._id);
          this.settle();
        });
    }
  }

  private async run(job: Job, freeSlot: () => void): Promise<void> {
    const { deps } = this;
    let delivery = job.delivery;
    const now = deps.clock();
    if (!delivery.lease_until || delivery.lease_until.getTime() - now.getTime() < LEASE_MARGIN_MS) {
      // Waited long in the queue: take the next claim before sending. Losing it means
      // our lease ran out and another process has the delivery now.
      const renewed = await claim(deps.collections, delivery, deps.owner, now, deps.leaseMs);
      if (!renewed) return;
      delivery = renewed;
    }
    // The copy the lease keeper updates in place: the record is fenced on its latest claim.
    const held: DeliveryDoc = { ...delivery };
    this.active.set(held._id, held);
    this.startKeeper();
    try {
      // Read now, not when the event was consumed: a DELETE that returned before this read stops the send.
      const sub = await deps.collections.webhooks.findOne({ _id: held.subscription_id });
      if (!sub) {
        await dropDelivery(deps.collections, held);
        return;
      }
      // Likewise a PATCH enabled:false: given up unsent, not kept for a re-enabling.
      if (sub.enabled === false) {
        await giveUpDisabled(deps.collections, held, deps.clock());
        deps.log.debug({ delivery: held._id, subscription: sub._id }, 'delivery given up: its subscription is disabled');
        return;
      }
      const outcome = await send(deps, held, sub);
      const slow = SLOW_OUTCOMES.has(outcome.outcome);
      this.queue.observe(held.subscription_id, slow);
      if (slow) this.handBack(this.queue.trim(held.subscription_id));
      freeSlot();
      deps.onAttempt?.(outcome);
      await deps.hooks?.beforeRecord?.(outcome);
      await this.recorder.record(outcome, 'att_' + randomBytes(12).toString('hex'));
      deps.log.debug({ delivery: held._id, attempt: outcome.attempt, status: outcome.status, outcome: outcome.outcome, ms: outcome.durationMs }, 'delivery attempt');
    } finally {
      this.active.delete(held._id);
    }
  }

  /** Queued work of a subscription that just slowed down: back to the store, where it waits without holding memory here. */
  private handBack(jobs: Job[]): void {
    if (jobs.length === 0) return;
    const ids = jobs.map((j) => j.delivery._id);
    for (const id of ids) this.held.delete(id);
    this.bookkeeping++;
    releaseLeases(this.deps.collections, ids, this.deps.owner, this.deps.clock())
      .catch((err: unknown) => this.deps.log.warn({ err }, 'could not hand queued deliveries back; their leases will expire'))
      .finally(() => this.settle());
  }

  private settle(): void {
    this.bookkeeping--;
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
    for (const held of this.active.values()) {
      if (this.extending.has(held._id) || !held.lease_until) continue;
      if (held.lease_until.getTime() - now.getTime() > deps.leaseMs / 2) continue;
      this.extending.add(held._id);
      claim(deps.collections, held, deps.owner, now, deps.leaseMs)
        .then(async (renewed) => {
          if (renewed) {
            Object.assign(held, { claim_seq: renewed.claim_seq, lease_owner: renewed.lease_owner, lease_until: renewed.lease_until });
            // The record finished while we extended: give the lease back so a due retry is not held up.
            if (!this.active.has(held._id)) await releaseLeases(deps.collections, [held._id], deps.owner, deps.clock());
          } else {
            held.lease_until = null; // lost: the record will be fenced out; stop trying
            deps.log.warn({ delivery: held._id }, 'lost the lease of a delivery whose attempt is pending; its record will not overwrite the new holder');
          }
        })
        .catch((err: unknown) => deps.log.warn({ err, delivery: held._id }, 'could not extend a delivery lease; will try again'))
        .finally(() => this.extending.delete(held._id));
    }
  }
}

/**
 * The secrets an attempt at `at` is signed with: the current one, then the
 * one a rotation replaced while its grace period lasts (never after).
 */
export function signingSecrets(box: SecretBox, sub: WebhookDoc, at: Date): string[] {
  const secrets = [box.open(sub.secret_enc, sub._id)];
  const until = sub.previous_secret_expires_at;
  if (sub.previous_secret_enc && until && until.getTime() > at.getTime()) secrets.push(box.open(sub.previous_secret_enc, sub._id));
  return secrets;
}

/** One signed POST; returns what the recorder stores, next attempt time included. */
async function send(deps: DispatchDeps, delivery: DeliveryDoc, sub: WebhookDoc): Promise<AttemptRecord> {
  const at = deps.clock();
  const headers = {
    ...signDelivery(signingSecrets(deps.box, sub, at), delivery._id, delivery.body, at),
    'X-Service-Event': delivery.event_type,
    'X-Service-Delivery': delivery._id,
  };
  const result = await deps.sender.send(sub.url, delivery.body, headers, { account: sub.account_id });
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
