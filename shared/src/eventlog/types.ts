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
] as const;

export type EventType = (typeof EVENT_TYPES)[number];

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
