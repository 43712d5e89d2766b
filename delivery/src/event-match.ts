/**
 * The consumer's view of one message: decoded into an event, and matched to
 * the subscriptions that take it (consumer.ts hands each match over).
 */
import { decodeEnvelope, toRecord } from '#shared/eventlog/envelope.js';
import { TRACEPARENT_HEADER } from '#shared/eventlog/event-log.js';
import { tracingOn } from '#shared/telemetry.js';
import type { KafkaMessage } from '#shared/eventlog/kafka.js';
import { subscriptionTakes, type EventEnvelope, type EventRecord } from '#shared/eventlog/types.js';
import type { Logger } from '#shared/log.js';
import type { WebhookDoc } from '#shared/mongo/index.js';
import { takesEventType, type DeliveryCollections } from './deliveries.js';

export interface Decoded {
  envelope: EventEnvelope;
  record: EventRecord;
  /** The message's offset in its partition. */
  offset: string;
  /** Its `traceparent` header (written by the publishing API while tracing is on). */
  traceparent?: string;
}

/** Parses one message; null (logged) for anything that is not an event envelope. */
export function decodeMessage(message: KafkaMessage, partition: number, log: Logger): Decoded | null {
  const envelope = decodeEnvelope(message.value);
  if (!envelope) {
    log.warn({ partition, offset: message.offset }, 'skipping a message that is not an event envelope');
    return null;
  }
  // The same record polling returns: its cursor is the message's position in the log.
  const decoded: Decoded = { envelope, offset: message.offset, record: toRecord(envelope, { partition, offset: BigInt(message.offset) }) };
  const traceparent = message.headers?.[TRACEPARENT_HEADER];
  if (traceparent !== undefined && tracingOn()) decoded.traceparent = String(traceparent);
  return decoded;
}

/**
 * `["*"]` matches every type but the operational ones (listed by name, never
 * sent to the subscription they are about); a ping goes only to the subscription it names;
 * nothing older than the subscription (or than its last re-enabling); nothing
 * to a disabled one (dispatch checks again right before sending).
 */
export function matches(sub: WebhookDoc, envelope: EventEnvelope): boolean {
  if (sub.account_id !== envelope.account_id) return false;
  if (sub.enabled === false) return false;
  if (occurredBefore(envelope, sub)) return false;
  if (envelope.type === 'webhook.ping') return envelope.target_subscription_id === sub._id;
  // Operational notifications: listed by name, never to the subscription they are about.
  return takesEventType(sub, envelope.type) && subscriptionTakes(sub, envelope.type, envelope.data);
}

function occurredBefore(envelope: EventEnvelope, sub: WebhookDoc): boolean {
  const at = Date.parse(envelope.created_at);
  if (Number.isNaN(at)) return false;
  if (sub.created_at instanceof Date && at < sub.created_at.getTime()) return true;
  return sub.enabled_at instanceof Date && at < sub.enabled_at.getTime();
}

export async function subscriptionsByAccount(c: DeliveryCollections, accounts: string[]): Promise<Map<string, WebhookDoc[]>> {
  const byAccount = new Map<string, WebhookDoc[]>();
  if (accounts.length === 0) return byAccount;
  for (const sub of await c.webhooks.find({ account_id: { $in: accounts } }).toArray()) {
    const list = byAccount.get(sub.account_id) ?? [];
    list.push(sub);
    byAccount.set(sub.account_id, list);
  }
  return byAccount;
}

/** The latest `created_at` of the batch's events (ms); Infinity when one has none readable (the store is queried then). */
export function newestCreatedAt(events: Decoded[]): number {
  let newest = -Infinity;
  for (const e of events) {
    const at = Date.parse(e.envelope.created_at);
    if (Number.isNaN(at)) return Infinity;
    if (at > newest) newest = at;
  }
  return newest;
}
