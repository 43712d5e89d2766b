/**
 * Turns each consumed batch of events into deliveries.
 *
 * Per batch: decode the events, load the subscriptions of the batch's
 * accounts in one query, write one delivery per (event, matching
 * subscription) to MongoDB, hand the new ones to the dispatcher, and only
 * then commit the batch's offsets. A committed offset therefore always means
 * "every delivery of these events is durably recorded"; sending happens
 * afterwards and is driven by those records (retries and crash recovery go
 * through the same records), so a slow receiver never holds the consumer.
 */
import { decodeEnvelope, toRecord } from '../../shared/src/eventlog/envelope.js';
import type { EachBatchPayload, KafkaMessage } from '../../shared/src/eventlog/kafka.js';
import type { EventEnvelope, EventRecord } from '../../shared/src/eventlog/types.js';
import type { Logger } from '../../shared/src/log.js';
import type { DeliveryDoc, WebhookDoc } from '../../shared/src/mongo/index.js';
import { insertDeliveries, newDelivery, releaseLeases, type DeliveryCollections } from './deliveries.js';
import type { Dispatcher } from './dispatch.js';

export interface ConsumerDeps {
  log: Logger;
  collections: DeliveryCollections;
  dispatcher: Dispatcher;
  owner: string;
  leaseMs: number;
  clock: () => Date;
}

interface Decoded {
  envelope: EventEnvelope;
  record: EventRecord;
}

/** Parses one message; null (logged) for anything that is not an event envelope. */
export function decodeMessage(message: KafkaMessage, partition: number, log: Logger): Decoded | null {
  const envelope = decodeEnvelope(message.value);
  if (!envelope) {
    log.warn({ partition, offset: message.offset }, 'skipping a message that is not an event envelope');
    return null;
  }
  // The same record polling returns: its cursor is the message's position in the log.
  return { envelope, record: toRecord(envelope, { partition, offset: BigInt(message.offset) }) };
}

/** `["*"]` matches everything; a ping goes only to the subscription it names. */
export function matches(sub: WebhookDoc, envelope: EventEnvelope): boolean {
  if (sub.account_id !== envelope.account_id) return false;
  if (envelope.type === 'webhook.ping') return envelope.target_subscription_id === sub._id;
  return sub.events.includes('*') || sub.events.includes(envelope.type);
}

async function subscriptionsByAccount(c: DeliveryCollections, accounts: string[]): Promise<Map<string, WebhookDoc[]>> {
  const byAccount = new Map<string, WebhookDoc[]>();
  if (accounts.length === 0) return byAccount;
  for (const sub of await c.webhooks.find({ account_id: { $in: accounts } }).toArray()) {
    const list = byAccount.get(sub.account_id) ?? [];
    list.push(sub);
    byAccount.set(sub.account_id, list);
  }
  return byAccount;
}

/** Writes the deliveries of a batch and queues the new ones; returns how many were new. */
export async function scheduleBatch(deps: ConsumerDeps, events: Decoded[]): Promise<number> {
  const accounts = [...new Set(events.map((e) => e.envelope.account_id))];
  const subs = await subscriptionsByAccount(deps.collections, accounts);
  const now = deps.clock();
  const planned: { doc: DeliveryDoc; sub: WebhookDoc }[] = [];
  for (const { envelope, record } of events) {
    const body = JSON.stringify(record);
    for (const sub of subs.get(envelope.account_id) ?? []) {
      if (!matches(sub, envelope)) continue;
      const doc = newDelivery({ eventId: envelope.id, eventType: envelope.type, accountId: envelope.account_id, subscription: sub, body, owner: deps.owner, now, leaseMs: deps.leaseMs });
      planned.push({ doc, sub });
    }
  }
  if (planned.length === 0) return 0;
  const fresh = await insertDeliveries(deps.collections, planned.map((p) => p.doc));
  const handBack: string[] = [];
  for (const { doc, sub } of planned) {
    if (!fresh.has(doc._id)) continue;
    if (deps.dispatcher.enqueue({ delivery: doc, subscription: sub }) === 'full') handBack.push(doc._id);
  }
  // A subscription with a backlog here (a slow receiver): its new deliveries wait in MongoDB instead.
  await releaseLeases(deps.collections, handBack, deps.owner, now);
  return fresh.size;
}

/** Waits (heartbeating) while this process already has plenty of deliveries queued. */
async function waitForRoom(deps: ConsumerDeps, payload: EachBatchPayload): Promise<void> {
  const highWater = deps.dispatcher.concurrency * 4;
  while (deps.dispatcher.load > highWater && payload.isRunning() && !payload.isStale()) {
    await new Promise((r) => setTimeout(r, 100));
    await payload.heartbeat();
  }
}

export function eachBatchHandler(deps: ConsumerDeps) {
  return async function eachBatch(payload: EachBatchPayload): Promise<void> {
    const { batch } = payload;
    if (batch.messages.length === 0) return;
    await waitForRoom(deps, payload);
    if (!payload.isRunning() || payload.isStale()) return;
    const events = batch.messages.map((m) => decodeMessage(m, batch.partition, deps.log)).filter((e): e is Decoded => e !== null);
    const created = await scheduleBatch(deps, events);
    // Every delivery of these events is recorded: now the offsets may move.
    payload.resolveOffset(batch.lastOffset());
    await payload.commitOffsetsIfNecessary();
    await payload.heartbeat();
    if (created > 0) deps.log.debug({ partition: batch.partition, events: events.length, deliveries: created }, 'deliveries scheduled');
  };
}
