/**
 * Sends attempts with bounded concurrency. Each attempt runs on its own, so a
 * receiver that hangs for the full 4 s holds one slot and nothing else: other
 * receivers' deliveries and the consumer's next batch go on meanwhile. Slots
 * are shared out per subscription (round-robin, capped per subscription), so
 * one dead receiver with a backlog cannot take them all.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from '../../shared/src/log.js';
import type { DeliveryDoc, WebhookDoc } from '../../shared/src/mongo/index.js';
import type { SecretBox } from '../../shared/src/secrets.js';
import { signDelivery } from '../../shared/src/signing.js';
import { ATTEMPT_TIMEOUT_MS } from './config.js';
import { claim, dropDelivery, releaseLeases, type AttemptRecord, type DeliveryCollections } from './deliveries.js';
import type { Sender } from './http-sender.js';
import { AttemptRecorder } from './recorder.js';
import { FairQueue } from './fair-queue.js';
import { nextDelay } from './retry-policy.js';

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
}

export interface Job {
  delivery: DeliveryDoc;
  /** The subscription as the consumer loaded it; read fresh when absent. */
  subscription?: WebhookDoc;
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
  private idle: (() => void)[] = [];

  constructor(
    private readonly deps: DispatchDeps,
    private readonly limits: DispatcherLimits,
  ) {
    this.queue = new FairQueue<Job>(limits.perSubscription, limits.perSubscription * 4);
    this.recorder = new AttemptRecorder(deps.collections);
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

  /** Slots free right now (the poller claims no more than this). */
  get room(): number {
    return this.stopped ? 0 : Math.max(0, this.limits.concurrency - this.load);
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

  /** Stops taking work, waits for attempts in flight (and their records), hands queued ones back. */
  async stop(timeoutMs: number): Promise<void> {
    this.stopped = true;
    const queued = this.queue.drain().map((j) => j.delivery._id);
    for (const id of queued) this.held.delete(id);
    await releaseLeases(this.deps.collections, queued, this.deps.owner, this.deps.clock()).catch((err: unknown) =>
      this.deps.log.warn({ err }, 'could not release queued deliveries; their leases will expire'),
    );
    if (this.bookkeeping === 0) return;
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, timeoutMs);
      this.idle.push(() => {
        clearTimeout(timer);
        resolve();
      });
    });
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
          this.bookkeeping--;
          this.held.delete(job.delivery._id);
          if (this.bookkeeping === 0) for (const wake of this.idle.splice(0)) wake();
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
    const sub = job.subscription ?? (await deps.collections.webhooks.findOne({ _id: delivery.subscription_id }));
    if (!sub) {
      await dropDelivery(deps.collections, delivery);
      return;
    }
    const outcome = await send(deps, delivery, sub);
    this.queue.observe(delivery.subscription_id, SLOW_OUTCOMES.has(outcome.outcome));
    freeSlot();
    deps.onAttempt?.(outcome);
    await this.recorder.record(outcome, 'att_' + randomBytes(12).toString('hex'));
    deps.log.debug({ delivery: delivery._id, attempt: outcome.attempt, status: outcome.status, outcome: outcome.outcome, ms: outcome.durationMs }, 'delivery attempt');
  }
}

/** One signed POST; returns what the recorder stores, next attempt time included. */
async function send(deps: DispatchDeps, delivery: DeliveryDoc, sub: WebhookDoc): Promise<AttemptRecord> {
  const secret = deps.box.open(sub.secret_enc, sub._id);
  const at = deps.clock();
  const headers = {
    ...signDelivery(secret, delivery._id, delivery.body, at),
    'X-Service-Event': delivery.event_type,
    'X-Service-Delivery': delivery._id,
  };
  const result = await deps.sender.send(sub.url, delivery.body, headers, { account: sub.account_id });
  const number = delivery.attempts + 1;
  const delay = result.outcome === 'ok' ? null : nextDelay(number, deps.retrySchedule, result);
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
