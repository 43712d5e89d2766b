/** The event types of docs/spec.md section 6. */
export const EVENT_TYPES = [
  'call.started',
  'call.ended',
  'call.transcribed',
  'call.completed',
  'call.takeover',
  'message.received',
  'message.sent',
  'webhook.ping',
  'webhook.disabled',
  'webhook.delivery_exhausted',
] as const;

export type EventType = (typeof EVENT_TYPES)[number];

/**
 * Operational notifications: written to the account's log by the delivery
 * process (a subscription disabled for failing, a delivery given up for good),
 * never by producers (ingest refuses them). Opt-in: they are emitted only for
 * an account that lists the type by name on one of its subscriptions, a
 * subscription receives them only when it lists them by name (`"*"` does not
 * match them), and never the one about itself (docs/decisions.md).
 */
export const OPERATIONAL_EVENT_TYPES = ['webhook.disabled', 'webhook.delivery_exhausted'] as const satisfies readonly EventType[];
export type OperationalEventType = (typeof OPERATIONAL_EVENT_TYPES)[number];

/** The types a producer may send through ingest: every type but the operational ones, which only the service writes. */
export type ProducerEventType = Exclude<EventType, OperationalEventType>;
export const PRODUCER_EVENT_TYPES = EVENT_TYPES.filter((t) => !isOperationalEventType(t)) as readonly ProducerEventType[];

export function isOperationalEventType(value: unknown): value is OperationalEventType {
  return typeof value === 'string' && (OPERATIONAL_EVENT_TYPES as readonly string[]).includes(value);
}

/**
 * Whether a subscription listing `events` takes an event of `type` whose
 * data is `data`: `"*"` or the type, except that operational types must be
 * listed by name and never go to the subscription they are about
 * (`data.subscription_id`). A ping's target is checked by the caller.
 */
export function subscriptionTakes(sub: { _id: string; events: readonly string[] }, type: string, data?: Record<string, unknown> | null): boolean {
  if (isOperationalEventType(type)) return sub.events.includes(type) && data?.subscription_id !== sub._id;
  return sub.events.includes('*') || sub.events.includes(type);
}

export function isEventType(value: unknown): value is EventType {
  return typeof value === 'string' && (EVENT_TYPES as readonly string[]).includes(value);
}

/** What travels on the Kafka topic (key = account_id). */
export interface EventEnvelope {
  id: string;
  account_id: string;
  type: EventType;
  created_at: string;
  occurred_at?: string;
  data: Record<string, unknown>;
  /** Set on webhook.ping: only this subscription receives the push. */
  target_subscription_id?: string;
}

/** The event record every read path returns: polling, long-poll, SSE, webhook body. */
export interface EventRecord {
  id: string;
  type: EventType;
  /** When the API accepted the event (its clock), ISO 8601 with milliseconds. */
  created_at: string;
  /** When the producer says it happened; present only when the producer sent it. */
  occurred_at?: string;
  data: Record<string, unknown>;
  /**
   * Present (true) only on an event the store refused and the materializer
   * dead-lettered: `data` is then empty, the id, type and times are the event's.
   */
  data_unavailable?: true;
  cursor: string;
}
