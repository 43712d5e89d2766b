/**
 * Turns each consumed batch of events into deliveries, sent straight from
 * the log: the happy path never waits on the store.
 *
 * Per batch: decode the events, take the subscriptions of the batch's
 * accounts from the in-memory table when it is fresh enough for the batch's
 * newest event (subscription-table.ts), else load them in one query, and
 * hand one delivery per (event, matching subscription) to the dispatcher,
 * in memory. Nothing is written for a delivery that succeeds at once but
 * its attempt (batched with others).
 * The partition's offset is committed up to the lowest offset with an
 * unfinished delivery (offsets.ts): a delivery is finished once it
 * succeeded and its attempt is recorded, or once it is in the retry store
 * (a failed attempt becomes a retry document; a subscription without room
 * here has its overflow written there at once, in one insertMany per step).
 * A crash re-reads the log from the committed offset: at-least-once.
 *
 * A batch is handed over in steps of at most DELIVERIES_PER_STEP
 * deliveries (one account with 50 `["*"]` subscriptions turns 5,000 events
 * into 250,000): after each step the consumer heartbeats and waits
 * (heartbeating) for room in the dispatcher. A heartbeat also runs on a
 * timer for the whole batch, so a slow store cannot make the group evict
 * this member either.
 *
 * A `fifo` subscription's deliveries are not sent from memory: each step
 * appends them to its ordered queue in the store, in log order, and they are
 * finished (for the offsets) once there (fifo.ts sends them one at a time).
 *
 * A subscription receives only events that occurred at or after its
 * creation (event `created_at` >= subscription `created_at`), whatever the
 * group's start position: a new subscription, or a new delivery group
 * reading old log, never gets history.
 */
import type { EachBatchPayload, KafkaMessage } from '#shared/eventlog/kafka.js';
import type { EventEnvelope } from '#shared/eventlog/types.js';
import type { Logger } from '#shared/log.js';
import type { DeliveryDoc, WebhookDoc } from '#shared/mongo/index.js';
import { deliveryId } from '#shared/mongo/delivery-queue.js';
import { newDelivery, type DeliveryCollections } from './deliveries.js';
import type { Dispatcher } from './dispatch.js';
import { decodeMessage, matches, newestCreatedAt, subscriptionsByAccount, type Decoded } from './event-match.js';
import { logJob } from './jobs.js';
import { PartitionProgress } from './partition-progress.js';
import type { SubscriptionTable } from './subscription-table.js';

interface ConsumerDeps {
  log: Logger;
  collections: DeliveryCollections;
  dispatcher: Dispatcher;
  owner: string;
  leaseMs: number;
  clock: () => Date;
  /** Subscriptions in memory (subscription-table.ts): used for a batch when fresh enough for it, else the store is queried. */
  table?: SubscriptionTable;
}

/** Deliveries written per step of a batch; the consumer heartbeats and commits between steps. */
const DELIVERIES_PER_STEP = 500;

/** Called after each step with the last event handed over; false stops the batch there (rebalance, shutdown). */
type StepDone = (last: Decoded) => Promise<boolean>;

interface Planned {
  envelope: EventEnvelope;
  traceparent: string | undefined;
  body: string;
  sub: WebhookDoc;
  offset: string;
  id: string;
}

/**
 * Hands the deliveries of a batch to the dispatcher, in steps, and tracks
 * them in `progress` (the batch's partition); returns how many were new
 * here. Deliveries of a subscription with room in the dispatcher are queued
 * in memory; the rest (a slowed-down subscription's overflow) go to the
 * store unleased and due now, where the retry scheduler finds them (a slow
 * receiver's backlog holds no memory or slot here).
 */
export async function scheduleBatch(
  deps: ConsumerDeps,
  events: Decoded[],
  stepDone: StepDone = async () => true,
  progress = new PartitionProgress(),
  skipped: string[] = [],
): Promise<number> {
  // The batch's messages that are not events (offsets, increasing): seen in their place among
  // the events, never ahead of an event whose deliveries are not tracked yet (the committer
  // would commit past it).
  let nextSkipped = 0;
  const seenSkippedBelow = (offset: string | null): void => {
    for (; nextSkipped < skipped.length && (offset === null || BigInt(skipped[nextSkipped] as string) < BigInt(offset)); nextSkipped++) progress.seen(skipped[nextSkipped] as string);
  };
  const accounts = [...new Set(events.map((e) => e.envelope.account_id))];
  const subs = deps.table?.forEvents(accounts, newestCreatedAt(events)) ?? (await subscriptionsByAccount(deps.collections, accounts));
  let created = 0;
  let planned: Planned[] = [];
  for (let i = 0; i < events.length; i++) {
    const { envelope, record, offset, traceparent } = events[i] as Decoded;
    let body: string | null = null;
    for (const sub of subs.get(envelope.account_id) ?? []) {
      if (!matches(sub, envelope)) continue;
      const id = deliveryId(envelope.id, sub._id);
      // Finished by the partition's previous owner above its commit (its progress document).
      if (progress.resume?.finished(offset, id)) continue;
      body ??= JSON.stringify(record);
      planned.push({ envelope, traceparent, body, sub, offset, id });
      progress.add(offset, id);
    }
    seenSkippedBelow(offset);
    progress.seen(offset);
    if (planned.length >= DELIVERIES_PER_STEP || i === events.length - 1) {
      created += await handOver(deps, planned, progress);
      planned = [];
      if (!(await stepDone(events[i] as Decoded))) return created;
    }
  }
  // Every event is tracked: the non-events after the last one are seen too.
  seenSkippedBelow(null);
  return created;
}

/** How long a step waits for a healthy subscription's waiting room before its overflow goes to the store. */
const ROOM_WAIT_MS = 5000;

/**
 * Waits until a healthy subscription has room for one more delivery (a
 * healthy receiver drains its queue at its own pace: the consumer follows it
 * instead of spilling work into the store, where only the retry scheduler's
 * polling would find it), at most ROOM_WAIT_MS. A slowed-down subscription
 * (hanging, refusing connections) is not waited for: its overflow goes to
 * the store at once, so it never holds up the partition.
 */
async function roomFor(deps: ConsumerDeps, subscriptionId: string): Promise<boolean> {
  const deadline = Date.now() + ROOM_WAIT_MS;
  for (;;) {
    if (deps.dispatcher.roomFor(subscriptionId) > 0) return true;
    // Rate-limited with its waiting room full: its overflow waits in the store, not the partition.
    if (deps.dispatcher.isSlowed(subscriptionId) || deps.dispatcher.isThrottled(subscriptionId) || Date.now() >= deadline) return false;
    // Its attempts are out and nothing moved for a while: likely hanging (the cut comes only
    // with its first timeout, 4 s on): do not hold the partition's other subscriptions for it.
    if (deps.dispatcher.isStalled(subscriptionId, STALLED_MS)) return false;
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** A subscription whose running attempts show no start or finish for this long is not waited for. */
const STALLED_MS = 1000;

async function handOver(deps: ConsumerDeps, planned: Planned[], progress: PartitionProgress): Promise<number> {
  if (planned.length === 0) return 0;
  const now = deps.clock();
  const overflow: { doc: DeliveryDoc; offset: string }[] = [];
  const ordered: { doc: DeliveryDoc; offset: string }[] = [];
  let queued = 0;
  for (const { envelope, traceparent, body, sub, offset, id } of planned) {
    const doc: DeliveryDoc = {
      ...newDelivery({ eventId: envelope.id, eventType: envelope.type, accountId: envelope.account_id, subscription: sub, body, owner: deps.owner, now, leaseMs: deps.leaseMs, traceparent }),
      lease_owner: null,
      lease_until: null,
    };
    // An ordered subscription's deliveries all go to its queue in the store, in log order (fifo.ts).
    if (sub.ordering === 'fifo') {
      ordered.push({ doc: { ...doc, fifo: true }, offset });
      continue;
    }
    if (await roomFor(deps, sub._id)) {
      const res = deps.dispatcher.enqueue(logJob(doc, () => progress.finish(offset, id), sub.rate_limit ?? null));
      if (res === 'queued') queued++;
      if (res === 'queued' || res === 'attached') continue;
    }
    overflow.push({ doc, offset });
  }
  // One insertMany for the step's overflow (a hung subscription's backlog), retried until it
  // lands, in the background: the partition's next events do not wait for the store.
  if (overflow.length > 0) deps.dispatcher.storeOverflow(overflow.map((o) => logJob(o.doc, () => progress.finish(o.offset, o.doc._id))));
  // Likewise, appended to their ordered queues in the background, one step after another.
  if (ordered.length > 0) deps.dispatcher.storeFifo(ordered.map((o) => logJob(o.doc, () => progress.finish(o.offset, o.doc._id))));
  return queued + ordered.length;
}

/**
 * Waits (heartbeating) while this process already has plenty of deliveries
 * queued or sending, or very many records not yet written (a slow store:
 * memory stays bounded, but a few hundred records in flight do not stop the
 * sending).
 */
async function waitForRoom(deps: ConsumerDeps & { offsets?: Offsets }, payload: EachBatchPayload): Promise<void> {
  const highWater = deps.dispatcher.concurrency * 4;
  const recordHighWater = deps.dispatcher.concurrency * 16;
  const unfinishedHighWater = deps.dispatcher.concurrency * 64;
  const full = (): boolean =>
    deps.dispatcher.backlog > highWater || deps.dispatcher.recording > recordHighWater || (deps.offsets?.unfinished ?? 0) > unfinishedHighWater;
  while (full() && payload.isRunning() && !payload.isStale()) {
    await new Promise((r) => setTimeout(r, 100));
    await payload.heartbeat();
  }
}

/** Heartbeats on a timer while a batch is being scheduled; `failed` once the group says we must rejoin. */
function heartbeatWhile(payload: EachBatchPayload, log: Logger): { stop(): void; failed(): boolean } {
  let failed = false;
  let beating = false;
  const timer = setInterval(() => {
    if (beating || failed) return;
    beating = true;
    payload
      .heartbeat()
      .catch((err: unknown) => {
        failed = true; // a rebalance (or a lost member id): stop at the next step, the runner rejoins
        log.info({ err }, 'heartbeat refused while scheduling a batch; stopping at the next step');
      })
      .finally(() => (beating = false));
  }, 1000);
  timer.unref();
  return { stop: () => clearInterval(timer), failed: () => failed };
}

/** Where the handler tracks each partition's finished deliveries, and how it commits them. */
interface Offsets {
  of(partition: number): PartitionProgress;
  /** Before a partition's first batch in this generation: what its previous owner finished above the commit (see offsets.ts). */
  resume?(partition: number, firstOffset: string): Promise<void>;
  /** Deliveries not finished yet (the consumer waits while there are very many). */
  readonly unfinished: number;
  commit(): Promise<void>;
}

export function eachBatchHandler(deps: ConsumerDeps & { offsets: Offsets }) {
  return async function eachBatch(payload: EachBatchPayload): Promise<void> {
    const { batch } = payload;
    if (batch.messages.length === 0) return;
    await waitForRoom(deps, payload);
    const beat = heartbeatWhile(payload, deps.log);
    const alive = (): boolean => payload.isRunning() && !payload.isStale() && !beat.failed();
    const progress = deps.offsets.of(batch.partition);
    try {
      if (!alive()) return;
      if (progress.resume === null && deps.offsets.resume) await deps.offsets.resume(batch.partition, (batch.messages[0] as KafkaMessage).offset);
      const events: Decoded[] = [];
      const skipped: string[] = [];
      for (const m of batch.messages) {
        const e = decodeMessage(m, batch.partition, deps.log);
        if (e) events.push(e);
        else skipped.push(m.offset);
      }
      const created = await scheduleBatch(
        deps,
        events,
        async (last) => {
          // Read up to `last`: the next fetch starts after it. What is committed is the
          // lowest unfinished offset (the committer's timer, and right here).
          payload.resolveOffset(last.offset);
          void deps.offsets.commit().catch((err: unknown) => deps.log.info({ err }, 'could not commit delivery offsets; will try again'));
          await payload.heartbeat();
          await waitForRoom(deps, payload);
          return alive();
        },
        progress,
        skipped,
      );
      if (!alive()) return;
      payload.resolveOffset(batch.lastOffset());
      await payload.heartbeat();
      if (created > 0) deps.log.debug({ partition: batch.partition, events: events.length, deliveries: created }, 'deliveries handed over');
    } finally {
      beat.stop();
    }
  };
}
