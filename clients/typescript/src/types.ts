/**
 * The shapes of the public API, written over the same schemas as the server
 * (the schemas.ts files under api/src/features/ and the OpenAPI document at
 * GET /api/openapi.json). Field names are the wire names.
 */

/** The event types of the contract (docs/spec.md section 6). */
export const EVENT_TYPES = [
  'call.started',
  'call.ended',
  'call.transcribed',
  'call.completed',
  'call.takeover',
  'message.received',
  'message.sent',
  'webhook.ping',
  // Operational notifications, written by the service (ingest refuses them); opt-in by listing them on a subscription.
  'webhook.disabled',
  'webhook.delivery_exhausted',
] as const;

export type EventType = (typeof EVENT_TYPES)[number];

/** One event as polling, long-poll, SSE and webhook deliveries carry it. */
export interface EventRecord {
  /** `evt_` + 24 hex characters. */
  id: string;
  type: EventType;
  /** When the API accepted it (ISO 8601 UTC). */
  created_at: string;
  /** When the producer says it happened, if it said. */
  occurred_at?: string;
  data: Record<string, unknown>;
  /** Its position in the account's log: pass it back as `since`. Opaque. */
  cursor: string;
}

export interface ApiKeyInfo {
  preview: string;
  created_at: string;
}

export interface User {
  id: string;
  email: string;
  name: string;
  phone: string | null;
  plan: string | null;
  created_at: string;
  api_key: ApiKeyInfo | null;
}

export interface SignupInput {
  email: string;
  name: string;
  password: string;
  phone?: string | null;
  plan?: string | null;
}

export interface LoginInput {
  email: string;
  password: string;
}

export interface Session {
  /** A session token (JWT): pass it as `token` to a new client. */
  token: string;
  user: User;
}

export interface CreatedApiKey {
  /** The raw key, shown once. */
  api_key: string;
  preview: string;
  created_at: string;
}

export interface ListEventsParams {
  /** Only this type. */
  type?: EventType;
  /** Events strictly after this cursor. */
  since?: string;
  /** 1 to 500, default 100. */
  limit?: number;
}

export interface EventPage {
  events: EventRecord[];
  /** Pass back as `since`; null while there is neither a `since` nor any event. */
  cursor: string | null;
}

export interface WaitParams {
  types?: EventType[];
  /** 0 to 55000; default 30000. */
  timeout_ms?: number;
  since?: string;
}

export type WaitResult = { event: EventRecord } | { event: null; timed_out: true; cursor: string | null };

export interface StreamToken {
  /** `svcst_…`, valid about 120 s. */
  token: string;
  expires_at: string;
  /** Relative unless the server has PUBLIC_BASE_URL. */
  stream_url: string;
}

/** How a subscription's deliveries are sent: concurrently (`unordered`) or one at a time in log order (`fifo`). */
export type WebhookOrdering = 'unordered' | 'fifo';

export interface Webhook {
  id: string;
  url: string;
  events: (EventType | '*')[];
  description: string;
  enabled: boolean;
  /** Why it is disabled: `manual` (PATCH) or `endpoint_failing` (every attempt failed for days); null while enabled. */
  disabled_reason: 'manual' | 'endpoint_failing' | null;
  disabled_at: string | null;
  /** Deliveries per second at most; null: unlimited. */
  rate_limit: number | null;
  /** `fifo`: one delivery at a time in log order, a failing one holding the rest; `unordered`: concurrent (the default). */
  ordering: WebhookOrdering;
  /** The custom headers sent on every attempt, each value masked: `{ "X-Api-Key": "****" }` ({} when none). */
  headers: Record<string, '****'>;
  created_at: string;
  last_status: number | null;
  last_delivery_at: string | null;
  last_error: string | null;
}

export interface WebhookWithSecret extends Webhook {
  /** `whsec_…`: the signing secret. */
  secret: string;
}

export interface CreateWebhookInput {
  url: string;
  /** Event types, or `['*']` for all. */
  events: (EventType | '*')[];
  description?: string;
  /** Deliveries per second at most (1 to 10000); null or absent: unlimited. */
  rate_limit?: number | null;
  /** `fifo`: one delivery at a time in log order, each failing one holding the ones after it until it succeeds or is given up; absent: `unordered`. */
  ordering?: WebhookOrdering;
  /** Custom headers sent on every attempt (at most 20; stored encrypted, shown masked). The service's own and hop-by-hop headers are refused (400 naming the header). */
  headers?: Record<string, string>;
}

export interface UpdateWebhookInput {
  url?: string;
  events?: (EventType | '*')[];
  description?: string;
  enabled?: boolean;
  rate_limit?: number | null;
  /** Applies to events that occur after the change. */
  ordering?: WebhookOrdering;
  /** Replaces the whole set of custom headers; `{}` removes them all. */
  headers?: Record<string, string>;
}

export type AttemptOutcome = 'ok' | 'timeout' | 'dns' | 'connect' | 'tls' | 'http_3xx' | 'http_4xx' | 'http_5xx' | 'blocked_address';

export type DeliveryTrigger = 'event' | 'resend' | 'recover' | 'replay';

/** `POST /api/v1/webhooks/{id}/deliveries/{delivery_id}/resend`. */
export interface ResendResult {
  delivery_id: string;
  resent_from: string;
  event_id: string;
  trigger: 'resend';
}

/** `POST /api/v1/webhooks/{id}/recover`. */
export interface RecoverResult {
  queued: number;
  truncated: boolean;
  /** With next_after_id, where to continue when truncated: pass them as since and after_id. */
  next_since: string | null;
  next_after_id: string | null;
}

/** `POST /api/v1/webhooks/{id}/replay`. */
export interface ReplayResult {
  queued: number;
  cursor: string;
  truncated: boolean;
}

export interface DeliveryAttempt {
  id: string;
  delivery_id: string;
  event_id: string;
  event_type: EventType;
  attempt: number;
  status: number | null;
  outcome: AttemptOutcome;
  error: string | null;
  duration_ms: number;
  at: string;
  next_attempt_at: string | null;
  /** true on the attempt after which its delivery was given up for good (failed, nothing scheduled after it); `recover` queues such deliveries again. */
  given_up: boolean;
  /** Why its delivery was made: `event` (the event itself and its retries), or the operation that sent it again. */
  trigger: DeliveryTrigger;
}

/** `GET /api/v1/deliveries`: every filter given must hold. */
export interface DeliverySearchParams {
  /** Comma-separated outcomes (`ok`, `timeout`, `http_5xx`, …), or `failed` for every outcome but `ok`. */
  outcome?: string;
  /** One status (`404`), a class (`5xx`) or an inclusive range (`400-429`). */
  status?: string;
  /** Comma-separated event types. */
  event_type?: string;
  webhook_id?: string;
  /** Attempts made at or after this time (ISO 8601). */
  from?: string;
  /** Attempts made before this time (ISO 8601). */
  to?: string;
  /** 1 to 200, default 50. */
  limit?: number;
  /** `next_cursor` of the previous page, with the same filters. */
  cursor?: string;
}

export interface DeliverySearchAttempt extends DeliveryAttempt {
  webhook_id: string;
}

export interface DeliverySearchPage {
  /** Newest first. */
  attempts: DeliverySearchAttempt[];
  /** Null when nothing is left to examine; a page may be short (even empty) and still have one. */
  next_cursor: string | null;
}

export interface IngestEventInput {
  account_id: string;
  type: EventType;
  data?: Record<string, unknown>;
  occurred_at?: string;
}

/** One entry of the event-type catalog (`GET /api/v1/event-types`). */
export interface EventTypeInfo {
  type: EventType;
  /** When an event of this type is fired. */
  description: string;
  /** JSON Schema (2020-12) of the event's `data`: the fields producers send; none required, others allowed. */
  data_schema: Record<string, unknown>;
}

export interface Health {
  status: string;
  [key: string]: unknown;
}

export interface SecretRotation {
  secret: string;
  /** Until when the replaced secret also signs deliveries; null when the grace period was 0. */
  previous_secret_expires_at: string | null;
}

export interface StatsCounts {
  succeeded: number;
  failed: number;
  retrying: number;
}

export interface WebhookStats {
  webhook_id: string;
  window: '1h' | '24h';
  from: string;
  to: string;
  bucket_seconds: number;
  totals: StatsCounts & { attempts: number };
  latency_ms: { p50: number | null; p99: number | null };
  buckets: (StatsCounts & { start: string })[];
  truncated: boolean;
}

export interface EventDelivery {
  id: string;
  webhook_id: string;
  url: string | null;
  state: 'pending' | 'succeeded' | 'failed';
  attempts_made: number;
  next_attempt_at: string | null;
  last_status: number | null;
  last_outcome: string | null;
  created_at: string;
  updated_at: string;
  trigger: DeliveryTrigger;
  attempts: DeliveryAttempt[];
}

export interface EventDeliveries {
  event: EventRecord;
  deliveries: EventDelivery[];
  truncated: boolean;
}
