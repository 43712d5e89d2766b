import { EVENT_TYPES } from '../../../../shared/src/eventlog/types.js';
import type { DisabledReason } from '../../../../shared/src/mongo/index.js';
import { component, DateTime, EventTypeSchema, Nullable, type Static, Type } from '../../shapes.js';
import { bodyValidator, queryValidator } from '../../validation.js';

export const MAX_URL_LENGTH = 2048;
export const MAX_DESCRIPTION_LENGTH = 500;
export const MAX_ATTEMPTS_LIMIT = 200;
/** rate_limit: deliveries per second, per subscription. */
export const MAX_RATE_LIMIT = 10_000;
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
};

export const CreateWebhookBody = Type.Object(
  { url: webhookFields.url, events: webhookFields.events, description: Type.Optional(webhookFields.description), rate_limit: Type.Optional(webhookFields.rate_limit) },
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
