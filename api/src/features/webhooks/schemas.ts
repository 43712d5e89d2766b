import { EVENT_TYPES } from '#shared/eventlog/types.js';
import { MAX_HEADER_VALUE, MAX_HEADERS, MAX_HEADERS_BYTES } from '#shared/webhook-headers.js';
import { DELIVERY_TRIGGERS, SUBSCRIPTION_ORDERINGS, type DeliveryTrigger, type SubscriptionOrdering } from '#shared/mongo/documents.js';
import type { DisabledReason } from '#shared/mongo/index.js';
import { component, DateTime, EventTypeSchema, Nullable, type Static, Type } from '../../shapes.js';
import { bodyValidator, queryValidator } from '../../validation.js';

const MAX_URL_LENGTH = 2048;
const MAX_DESCRIPTION_LENGTH = 500;
const MAX_ATTEMPTS_LIMIT = 200;
/** rate_limit: deliveries per second, per subscription. */
const MAX_RATE_LIMIT = 10_000;
export const DEFAULT_ATTEMPTS_LIMIT = 50;

/** Subscription ids: `wh_` + 24 hex characters. Anything else cannot exist: 404. */
export const WEBHOOK_ID = /^wh_[0-9a-f]{24}$/;

const webhookFields = {
  url: Type.String({ minLength: 1, maxLength: MAX_URL_LENGTH }),
  events: Type.Array(Type.Unsafe<string>({ type: 'string', enum: ['*', ...EVENT_TYPES] }), { minItems: 1, maxItems: EVENT_TYPES.length, uniqueItems: true }),
  description: Type.String({ maxLength: MAX_DESCRIPTION_LENGTH }),
  rate_limit: Nullable(Type.Integer({ minimum: 1, maximum: MAX_RATE_LIMIT }), {
    description: 'At most this many deliveries per second to this subscription (1 to 10000); null or absent: unlimited. Deliveries over it wait, in order, without holding back other subscriptions',
  }),
  ordering: Type.Unsafe<SubscriptionOrdering>({
    type: 'string',
    enum: [...SUBSCRIPTION_ORDERINGS],
    description:
      '`unordered` (the default): deliveries run concurrently and each retries on its own schedule. `fifo`: one delivery at a time, in the order of the log (then resends, recoveries and replays in the order they were asked for); a failing delivery holds the ones after it until it succeeds or is given up (its retry schedule ends, or a permanent failure). Other subscriptions are never held. A change applies to events that occur after it',
  }),
  headers: Type.Unsafe<Record<string, string>>({
    type: 'object',
    maxProperties: MAX_HEADERS,
    additionalProperties: { type: 'string', minLength: 1, maxLength: MAX_HEADER_VALUE },
    description: `Custom headers sent on every attempt, e.g. {"X-Api-Key": "…"}: at most ${MAX_HEADERS}, values of 1 to ${MAX_HEADER_VALUE} visible ASCII characters, ${MAX_HEADERS_BYTES} bytes in all. Stored encrypted; every answer shows them masked ("****"). The headers the service sets (X-Service-*, webhook-id, webhook-timestamp, webhook-signature, content-type, content-length, user-agent, host) and hop-by-hop ones (connection, keep-alive, transfer-encoding, te, trailer, upgrade, proxy-*) are refused with a 400 naming the header. On PATCH the object replaces the whole set ({} removes them all)`,
  }),
};

export const CreateWebhookBody = Type.Object(
  {
    url: webhookFields.url,
    events: webhookFields.events,
    description: Type.Optional(webhookFields.description),
    rate_limit: Type.Optional(webhookFields.rate_limit),
    ordering: Type.Optional(webhookFields.ordering),
    headers: Type.Optional(webhookFields.headers),
  },
  { additionalProperties: false },
);
export type CreateWebhookInput = Static<typeof CreateWebhookBody>;
export const createWebhookBody = bodyValidator<CreateWebhookInput>(CreateWebhookBody);

/** PATCH: any of the fields, at least one; unknown fields are refused by name. */
export const UpdateWebhookBody = Type.Object(
  {
    url: Type.Optional(webhookFields.url),
    events: Type.Optional(webhookFields.events),
    description: Type.Optional(webhookFields.description),
    enabled: Type.Optional(Type.Boolean()),
    rate_limit: Type.Optional(webhookFields.rate_limit),
    ordering: Type.Optional(webhookFields.ordering),
    headers: Type.Optional(webhookFields.headers),
  },
  { additionalProperties: false, minProperties: 1 },
);
export type UpdateWebhookInput = Static<typeof UpdateWebhookBody>;
export const updateWebhookBody = bodyValidator<UpdateWebhookInput>(UpdateWebhookBody);

export const AttemptsQuery = Type.Object(
  { limit: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_ATTEMPTS_LIMIT, default: DEFAULT_ATTEMPTS_LIMIT, description: 'Most attempts to return' })) },
  { additionalProperties: false },
);
export type AttemptsQuery = { limit: number }; // the default fills it in
export const attemptsQuery = queryValidator<AttemptsQuery>(AttemptsQuery);

/** The `{id}` of the subscription routes. Any id that does not match is a 404 (never a 400), so the route does not validate it. */
export const WebhookIdParams = Type.Object({
  id: Type.String({ pattern: WEBHOOK_ID.source, description: "The subscription id (any other account's id, or a malformed one, is a 404)" }),
});

const nullableDate = (description: string) => Type.Unsafe<string | null>({ type: ['string', 'null'], format: 'date-time', description });

const webhookProperties = {
  id: Type.String({ pattern: WEBHOOK_ID.source }),
  url: Type.String({ description: 'HTTPS, public; stored in canonical form' }),
  events: Type.Array(Type.String(), { description: 'Event types, or `["*"]` for all' }),
  description: Type.String(),
  enabled: Type.Boolean({ description: 'false: nothing is sent to it (set with PATCH, or by the delivery process when every attempt failed for its disabling period); true for subscriptions created before the field existed' }),
  disabled_reason: Nullable(Type.Unsafe<DisabledReason>({ type: 'string', enum: ['manual', 'endpoint_failing'] }), {
    description: 'Why it is disabled: `manual` (PATCH enabled:false) or `endpoint_failing` (every attempt failed for the disabling period, 5 days by default); null while enabled',
  }),
  disabled_at: nullableDate('When it was disabled; null while enabled'),
  rate_limit: Nullable(Type.Integer({ minimum: 1, maximum: MAX_RATE_LIMIT }), { description: 'Deliveries per second at most; null: unlimited' }),
  ordering: Type.Unsafe<SubscriptionOrdering>({ type: 'string', enum: [...SUBSCRIPTION_ORDERINGS], description: '`fifo`: one delivery at a time in log order, a failing one holding the rest; `unordered` (the default, and subscriptions created before the field existed)' }),
  headers: Type.Record(Type.String(), Type.Literal('****'), { description: 'The custom headers sent on every attempt, each value masked as "****" ({} when none)' }),
  created_at: DateTime(),
  last_status: Nullable(Type.Integer(), { description: 'HTTP status of the last attempt; null before the first attempt or when none was received (timeout, connection failure)' }),
  last_delivery_at: nullableDate('When the last attempt was made'),
  last_error: Nullable(Type.String(), { description: 'Why the last attempt failed; null after a success' }),
};

/** A subscription as every answer shows it (HTTP and MCP). */
export const WebhookSchema = component('Webhook', Type.Object(webhookProperties));

export const WebhookWithSecretSchema = component(
  'WebhookWithSecret',
  Type.Object({ ...webhookProperties, secret: Type.String({ pattern: '^whsec_', description: 'The signing secret (shown here and by POST …/secret)' }) }),
);

export const WebhookListSchema = component('WebhookList', Type.Object({ webhooks: Type.Array(WebhookSchema, { description: 'Oldest first' }) }));
export const WebhookSecretSchema = component('WebhookSecret', Type.Object({ secret: Type.String({ pattern: '^whsec_' }) }));
export const WebhookPingSchema = component('WebhookPing', Type.Object({ event_id: Type.String({ description: 'The `webhook.ping` event, now in the log' }) }));

/** Why a delivery was made (on its attempts and in an event's deliveries). */
export const TriggerSchema = Type.Unsafe<DeliveryTrigger>({
  type: 'string',
  enum: [...DELIVERY_TRIGGERS],
  description: '`event`: the event itself (its first send and the scheduled retries); `resend`, `recover`, `replay`: sent by that operation (POST …/resend, …/recover, …/replay) and its own retries',
});

export const DeliveryAttemptSchema = component(
  'DeliveryAttempt',
  Type.Object({
    id: Type.String(),
    delivery_id: Type.String({ description: 'Same on every attempt of one delivery (X-Service-Delivery)' }),
    event_id: Type.String(),
    event_type: EventTypeSchema,
    attempt: Type.Integer({ minimum: 1 }),
    status: Nullable(Type.Integer(), { description: "The receiver's HTTP status; null when none came back" }),
    outcome: Type.Unsafe<string>({ type: 'string', enum: ['ok', 'timeout', 'dns', 'connect', 'tls', 'http_3xx', 'http_4xx', 'http_5xx', 'blocked_address'] }),
    error: Nullable(Type.String()),
    duration_ms: Type.Integer({ minimum: 0 }),
    at: DateTime(),
    next_attempt_at: nullableDate('When the delivery is tried again; null after a success or the last attempt'),
    given_up: Type.Boolean({
      description:
        'true on the attempt after which the delivery was given up for good: it failed and no attempt follows (the retry schedule ran out, or a failure no retry could cure: blocked address, certificate for another name or untrusted, 410). POST …/recover queues such deliveries again',
    }),
    trigger: TriggerSchema,
  }),
);

export const DeliveryAttemptListSchema = component('DeliveryAttemptList', Type.Object({ attempts: Type.Array(DeliveryAttemptSchema, { description: 'Newest first' }) }));

/** Secret rotation: how long the replaced secret keeps signing, in seconds. */
export const DEFAULT_GRACE_PERIOD_S = 24 * 3600;
export const MAX_GRACE_PERIOD_S = 7 * 24 * 3600;

/** POST …/secret/rotate: an empty body (or none) takes the default grace period. */
export const RotateSecretBody = Type.Object(
  {
    grace_period_s: Type.Optional(
      Type.Integer({ minimum: 0, maximum: MAX_GRACE_PERIOD_S, default: DEFAULT_GRACE_PERIOD_S, description: 'Seconds during which deliveries are also signed with the replaced secret (0: it stops at once)' }),
    ),
  },
  { additionalProperties: false },
);
export type RotateSecretInput = { grace_period_s: number }; // the default fills it in
export const rotateSecretBody = bodyValidator<RotateSecretInput>(RotateSecretBody);

export const WebhookSecretRotationSchema = component(
  'WebhookSecretRotation',
  Type.Object({
    secret: Type.String({ pattern: '^whsec_', description: 'The new signing secret (POST …/secret shows it from now on)' }),
    previous_secret_expires_at: nullableDate('Until when the replaced secret also signs deliveries; null when the grace period was 0'),
  }),
);

/** Delivery ids: `dlv_` + 24 hex characters. Anything else cannot exist: 404. */
export const DELIVERY_ID = /^dlv_[0-9a-f]{24}$/;

export const DeliveryIdParams = Type.Object({
  id: WebhookIdParams.properties.id,
  delivery_id: Type.String({ pattern: DELIVERY_ID.source, description: "The delivery id (X-Service-Delivery; `delivery_id` of an attempt). Another subscription's or account's, or a malformed one, is a 404" }),
});

/** Recover: `since` at most this old (delivery records are swept after WEBHOOK_RETENTION_DAYS, 30 by default). */
export const MAX_RECOVER_AGE_MS = 30 * 24 * 3600 * 1000;
/** Recover: failed deliveries looked at per call, at most. */
export const MAX_RECOVER_DELIVERIES = 1000;
/** Replay: matching events read (and so queued) per call, at most. */
export const MAX_REPLAY_EVENTS = 1000;

export const RecoverBody = Type.Object(
  {
    since: DateTime('Failed deliveries created at or after this time are queued again; at most 30 days ago'),
    after_id: Type.Optional(
      Type.String({ pattern: DELIVERY_ID.source, description: 'To continue a truncated recover: next_after_id of its answer (with since = its next_since); of the deliveries created exactly at since, only those with a greater id are looked at' }),
    ),
  },
  { additionalProperties: false },
);
export type RecoverInput = Static<typeof RecoverBody>;
export const recoverBody = bodyValidator<RecoverInput>(RecoverBody);

const cursorField = (description: string) => Type.String({ minLength: 1, maxLength: 64, description });

export const ReplayBody = Type.Object(
  {
    since: cursorField('A cursor of polling (GET /api/v1/events): events strictly after it are replayed'),
    until: Type.Optional(cursorField('A cursor of polling: events up to and including it; without it, up to the last event stored now')),
  },
  { additionalProperties: false },
);
export type ReplayInput = Static<typeof ReplayBody>;
export const replayBody = bodyValidator<ReplayInput>(ReplayBody);

export const ResendResultSchema = component(
  'WebhookResend',
  Type.Object({
    delivery_id: Type.String({ pattern: DELIVERY_ID.source, description: 'The new delivery (its own X-Service-Delivery / webhook-id); its attempts have trigger `resend`' }),
    resent_from: Type.String({ pattern: DELIVERY_ID.source, description: 'The delivery sent again' }),
    event_id: Type.String(),
    trigger: Type.Literal('resend'),
  }),
);

export const RecoverResultSchema = component(
  'WebhookRecover',
  Type.Object({
    queued: Type.Integer({ minimum: 0, description: 'Deliveries queued (trigger `recover`): one per event whose deliveries all failed' }),
    truncated: Type.Boolean({ description: `true when more than ${MAX_RECOVER_DELIVERIES} failed deliveries were found: call again with since = next_since and after_id = next_after_id` }),
    next_since: Nullable(DateTime(), { description: 'Where to continue when truncated (the creation time of the last delivery looked at); null otherwise' }),
    next_after_id: Nullable(Type.String({ pattern: DELIVERY_ID.source }), { description: 'With next_since, where to continue when truncated (the id of the last delivery looked at): pass it as after_id; null otherwise' }),
  }),
);

export const ReplayResultSchema = component(
  'WebhookReplay',
  Type.Object({
    queued: Type.Integer({ minimum: 0, description: 'Deliveries queued (trigger `replay`), one per matching event, in log order' }),
    cursor: Type.String({ description: 'Where the replay stopped: every matching event up to it is queued. Pass it as since to continue' }),
    truncated: Type.Boolean({ description: `true when it stopped before until (the ${MAX_REPLAY_EVENTS}-event bound, or until lies beyond the stored log): call again with since = cursor` }),
  }),
);
