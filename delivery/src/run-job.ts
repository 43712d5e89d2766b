/**
 * One admitted job through the attempt and record stages, by its kind
 * (jobs.ts): a log job is sent with no lease and stored only if it fails; a
 * store job is sent under its lease (renewed first if it waited long), kept
 * alive until its record is written (lease-keeper.ts). The subscription is
 * read right before each attempt (attempt.ts); the outcome adapts the
 * subscription's pace (admission.ts), frees the slot, and is recorded
 * (recorder.ts, which feeds endpoint-health.ts and stores a failure's next
 * attempt for the retry scheduler).
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from '#shared/log.js';
import type { WebhookDoc } from '#shared/mongo/index.js';
import type { SecretBox } from '#shared/secrets.js';
import { withTimeout } from '#shared/timeout.js';
import type { Admission } from './admission.js';
import { Attempts } from './attempt.js';
import { ATTEMPT_TIMEOUT_MS } from './config.js';
import { dropDelivery, giveUpDisabled, isGiveUp, renewClaim, type AttemptRecord, type DeliveryCollections } from './deliveries.js';
import type { EndpointHealth } from './endpoint-health.js';
import type { Sender } from './http-sender.js';
import type { Job, Jobs, LogJob, StoreJob } from './jobs.js';
import { LeaseKeeper } from './lease-keeper.js';
import { AttemptRecorder } from './recorder.js';
import type { SubscriptionTable } from './subscription-table.js';

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

/** Waits, if need be, for the subscription's rate-limit token after its pre-send read. */
type Admit = (sub: WebhookDoc) => Promise<void>;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export class JobRunner {
  private readonly attempts: Attempts;
  /** Writes attempt outcomes in batches: one flush at a time, the next takes all that finished meanwhile. */
  private readonly recorder: AttemptRecorder;
  private readonly leases: LeaseKeeper;

  constructor(
    private readonly deps: DispatchDeps,
    private readonly admission: Admission<Job>,
    private readonly jobs: Jobs,
  ) {
    this.attempts = new Attempts(deps);
    this.recorder = new AttemptRecorder(deps.collections, deps.log, deps.health);
    this.leases = new LeaseKeeper(deps);
  }

  /** Runs `job`, admitted with (`gated`) or without its rate-limit token; `freeSlot` once its attempt is over. */
  run(job: Job, gated: boolean, freeSlot: () => void): Promise<void> {
    const admit = (sub: WebhookDoc): Promise<void> => this.tokenAfterRead(sub._id, sub.rate_limit, gated);
    return job.source === 'log' ? this.runLogJob(job, admit, freeSlot) : this.runStoreJob(job, admit, freeSlot);
  }

  /** At shutdown, once the records are written: the subscriptions' last status writes. */
  flushStatus(): Promise<void> {
    return this.recorder.flushStatus().catch((err: unknown) => this.deps.log.warn({ err }, 'could not write the last delivery status of subscriptions'));
  }

  /** At shutdown, last: no more lease extensions. */
  stopLeases(): void {
    this.leases.stop();
  }

  /**
   * After the pre-send read: the subscription's limit as now stored. A
   * delivery taken before this process knew of a limit waits for its token
   * here (holding its slot; at most the few taken before the first read).
   */
  private async tokenAfterRead(id: string, rate: number | null | undefined, gated: boolean): Promise<void> {
    for (let wait = this.admission.tokenAfterRead(id, rate, gated); wait > 0; wait = this.admission.tokenAfterRead(id, rate, gated)) await sleep(wait);
  }

  /**
   * A log job: no lease, no store until it fails. The subscription is read
   * right before sending all the same (a DELETE or PATCH that returned before
   * this point stops or changes the send).
   */
  private async runLogJob(job: LogJob, admit: Admit, freeSlot: () => void): Promise<void> {
    const tried = await this.attempts.attempt(job.delivery, admit);
    // Deleted or disabled: nothing is sent and nothing was stored.
    if (tried.kind !== 'sent') return;
    // If this cannot be written, the job is still finished only when it rejects: the
    // offsets stay below it and a restart sends it again.
    await this.afterSend(tried.outcome, freeSlot, true);
  }

  /** A store job: under its lease (renewed first if it waited long), kept alive until its record is written. */
  private async runStoreJob(job: StoreJob, admit: Admit, freeSlot: () => void): Promise<void> {
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
    const held = this.leases.keep(delivery);
    try {
      // Read now, not when the event was consumed: a DELETE that returned before this read stops the send.
      const tried = await this.attempts.attempt(held, admit);
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
      await this.afterSend(tried.outcome, freeSlot, false);
    } finally {
      this.leases.letGo(held._id);
    }
  }

  /** After an attempt: the subscription's pace, the slot freed, the attempt recorded. */
  private async afterSend(outcome: AttemptRecord, freeSlot: () => void, fromLog: boolean): Promise<void> {
    const { deps } = this;
    // A cut cap: the subscription's queued work beyond its waiting room goes back to the store.
    this.jobs.handBack(this.admission.observe(outcome.delivery.subscription_id, outcome.outcome));
    freeSlot();
    deps.onAttempt?.(outcome);
    // Never rejects, and waits GIVEN_UP_WAIT_MS at most: the record goes ahead either way.
    if (deps.onGivenUp && isGiveUp(outcome)) await withTimeout(deps.onGivenUp(outcome), GIVEN_UP_WAIT_MS).catch(() => undefined);
    await deps.hooks?.beforeRecord?.(outcome);
    await this.recorder.record(outcome, 'att_' + randomBytes(12).toString('hex'), fromLog);
    await deps.hooks?.afterRecord?.(outcome);
    deps.log.debug({ delivery: outcome.delivery._id, attempt: outcome.attempt, status: outcome.status, outcome: outcome.outcome, ms: outcome.durationMs }, 'delivery attempt');
  }
}
