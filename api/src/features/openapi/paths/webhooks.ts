import type { ApiConfig } from '../../../config.js';
import { attemptsQuery, createWebhookBody, DEFAULT_GRACE_PERIOD_S, MAX_GRACE_PERIOD_S, rotateSecretBody, updateWebhookBody, WEBHOOK_ID } from '../../webhooks/schemas.js';
import { authedJson, errors, ref, USER_SECURITY } from '../components.js';
import { bodySchema, queryParameters, type SchemaObject } from '../convert.js';

const idParam = { name: 'id', in: 'path', required: true, description: 'The subscription id (any other account\'s id, or a malformed one, is a 404)', schema: { type: 'string', pattern: WEBHOOK_ID.source } };

const nullableDate = (description: string): SchemaObject => ({ type: ['string', 'null'], format: 'date-time', description });

const webhook = {
  type: 'object',
  required: ['id', 'url', 'events', 'description', 'enabled', 'created_at', 'last_status', 'last_delivery_at', 'last_error'],
  properties: {
    id: { type: 'string', pattern: WEBHOOK_ID.source },
    url: { type: 'string', description: 'HTTPS, public; stored in canonical form' },
    events: { type: 'array', items: { type: 'string' }, description: 'Event types, or `["*"]` for all' },
    description: { type: 'string' },
    enabled: { type: 'boolean', description: 'false: nothing is sent to it (set with PATCH); true for subscriptions created before the field existed' },
    created_at: { type: 'string', format: 'date-time' },
    last_status: { type: ['integer', 'null'], description: 'HTTP status of the last attempt; null before the first attempt or when none was received (timeout, connection failure)' },
    last_delivery_at: nullableDate('When the last attempt was made'),
    last_error: { type: ['string', 'null'], description: 'Why the last attempt failed; null after a success' },
  },
} satisfies SchemaObject;

/** Response schemas of the webhook endpoints (added to components.schemas). */
export const webhookSchemas: Record<string, SchemaObject> = {
  Webhook: webhook,
  // Spelled out rather than allOf: a closed-object check of allOf parts would refuse each other's fields.
  WebhookWithSecret: {
    ...webhook,
    required: [...webhook.required, 'secret'],
    properties: { ...webhook.properties, secret: { type: 'string', pattern: '^whsec_', description: 'The signing secret (shown here and by POST …/secret)' } },
  },
  WebhookList: { type: 'object', required: ['webhooks'], properties: { webhooks: { type: 'array', items: ref('Webhook'), description: 'Oldest first' } } },
  WebhookSecret: { type: 'object', required: ['secret'], properties: { secret: { type: 'string', pattern: '^whsec_' } } },
  WebhookSecretRotation: {
    type: 'object',
    required: ['secret', 'previous_secret_expires_at'],
    properties: {
      secret: { type: 'string', pattern: '^whsec_', description: 'The new signing secret, from now on the one POST …/secret shows' },
      previous_secret_expires_at: nullableDate('Until when deliveries are also signed with the replaced secret; null when grace_period_s was 0'),
    },
  },
  WebhookPing: { type: 'object', required: ['event_id'], properties: { event_id: { type: 'string', description: 'The `webhook.ping` event, now in the log' } } },
  DeliveryAttempt: {
    type: 'object',
    required: ['id', 'delivery_id', 'event_id', 'event_type', 'attempt', 'status', 'outcome', 'error', 'duration_ms', 'at', 'next_attempt_at'],
    properties: {
      id: { type: 'string' },
      delivery_id: { type: 'string', description: 'Same on every attempt of one delivery (X-Service-Delivery)' },
      event_id: { type: 'string' },
      event_type: ref('EventType'),
      attempt: { type: 'integer', minimum: 1 },
      status: { type: ['integer', 'null'], description: 'The receiver\'s HTTP status; null when none came back' },
      outcome: { type: 'string', enum: ['ok', 'timeout', 'dns', 'connect', 'tls', 'http_3xx', 'http_4xx', 'http_5xx', 'blocked_address'] },
      error: { type: ['string', 'null'] },
      duration_ms: { type: 'integer', minimum: 0 },
      at: { type: 'string', format: 'date-time' },
      next_attempt_at: nullableDate('When the delivery is tried again; null after a success or the last attempt'),
    },
  },
  DeliveryAttemptList: { type: 'object', required: ['attempts'], properties: { attempts: { type: 'array', items: ref('DeliveryAttempt'), description: 'Newest first' } } },
};

/** Webhook subscriptions (docs/spec.md section 4, Webhooks), plus the attempt log. */
export function webhookPaths(config: ApiConfig): Record<string, SchemaObject> {
  const op = (operationId: string, summary: string, rest: SchemaObject): SchemaObject => ({ operationId, tags: ['webhooks'], summary, security: USER_SECURITY, ...rest });
  return {
    '/api/v1/webhooks': {
      get: op('listWebhooks', 'List the account\'s subscriptions', { responses: { '200': authedJson('The subscriptions', ref('WebhookList')), ...errors(401, 429, 503) } }),
      post: op('createWebhook', 'Subscribe an HTTPS endpoint', {
        description: `The URL must be HTTPS and resolve only to public addresses (loopback, private, link-local, CGNAT, multicast and reserved addresses are refused, here and again at every delivery), on port 443, 8443 or one the deployment allows (WEBHOOK_ALLOWED_PORTS); a refusal names the rule broken, never the address a name resolved to. 429 when the account already has ${config.webhooks.dns.maxLookupsPerAccount} URL checks waiting for DNS. \`events\` is exactly \`["*"]\` or a list of types. At most ${config.webhooks.maxPerAccount} per account (409). The secret is in this response; it can be shown again with POST …/secret.`,
        requestBody: { required: true, content: { 'application/json': { schema: bodySchema(createWebhookBody) } } },
        responses: { '201': authedJson('The subscription, with its signing secret', ref('WebhookWithSecret')), ...errors(400, 401, 409, 413, 415, 429, 503) },
      }),
    },
    '/api/v1/webhooks/{id}': {
      parameters: [idParam],
      get: op('getWebhook', 'One subscription, with its last delivery status', { responses: { '200': authedJson('The subscription', ref('Webhook')), ...errors(401, 404, 429, 503) } }),
      patch: op('updateWebhook', 'Change a subscription\'s url, events, description or enabled', {
        description:
          'Any of the fields, at least one; an unknown field is a 400 naming it. A new `url` is checked as on POST: HTTPS, the port policy, public addresses only; a refusal names the rule broken; 429 when the account has too many URL checks waiting for DNS. Once this answers, every send uses the new values: `enabled: false` stops all sending, and deliveries already queued or waiting to be retried are given up unsent (never sent later); `enabled: true` after a disable delivers the events that occur from then on, not those of the time it was disabled. The secret is unchanged and not in this response.',
        requestBody: { required: true, content: { 'application/json': { schema: bodySchema(updateWebhookBody) } } },
        responses: { '200': authedJson('The subscription as now stored', ref('Webhook')), ...errors(400, 401, 404, 413, 415, 429, 503) },
      }),
      delete: op('deleteWebhook', 'Delete a subscription', {
        description: 'Its pending deliveries are dropped and its attempt log removed.',
        responses: { '204': { description: 'Deleted' }, ...errors(401, 404, 429, 503) },
      }),
    },
    '/api/v1/webhooks/{id}/secret': {
      parameters: [idParam],
      post: op('revealWebhookSecret', 'Show the signing secret again', { responses: { '200': authedJson('The secret', ref('WebhookSecret')), ...errors(401, 404, 429, 503) } }),
    },
    '/api/v1/webhooks/{id}/secret/rotate': {
      parameters: [idParam],
      post: op('rotateWebhookSecret', 'Replace the signing secret, keeping the old one valid for a grace period', {
        description: `Makes a new \`whsec_\` secret and answers it (POST …/secret shows it from now on). For \`grace_period_s\` (default ${DEFAULT_GRACE_PERIOD_S}, 24 h; 0 to ${MAX_GRACE_PERIOD_S}, 7 days) every delivery also carries a signature made with the replaced secret: \`webhook-signature\` lists one \`v1,\` value per secret, space-separated, so a Standard Webhooks verifier holding either secret accepts it; \`X-Service-Signature\` is made with the new secret only. After the grace period (or at once with 0) the replaced secret signs nothing. At most two secrets: rotating again during a grace period drops the oldest at once. Two rotations of one subscription at the same moment: one succeeds, the other answers 409. No body (or \`{}\`) takes the default.`,
        requestBody: { required: false, content: { 'application/json': { schema: bodySchema(rotateSecretBody) } } },
        responses: { '200': authedJson('The new secret', ref('WebhookSecretRotation')), ...errors(400, 401, 404, 409, 413, 415, 429, 503) },
      }),
    },
    '/api/v1/webhooks/{id}/ping': {
      parameters: [idParam],
      post: op('pingWebhook', 'Send a webhook.ping to this subscription', {
        description: 'Appends a `webhook.ping` event to the log (polling, long-poll and streams see it too); the delivery process sends it to this subscription only. Answers once the event is durable, not when it is delivered: follow it with GET …/deliveries or the subscription\'s last_status.',
        responses: { '202': authedJson('The ping event is in the log', ref('WebhookPing')), ...errors(401, 404, 429, 503) },
      }),
    },
    '/api/v1/webhooks/{id}/deliveries': {
      parameters: [idParam],
      get: op('listWebhookDeliveries', 'Recent delivery attempts of a subscription', {
        parameters: queryParameters(attemptsQuery, { limit: 'Most attempts to return' }),
        responses: { '200': authedJson('Attempts, newest first', ref('DeliveryAttemptList')), ...errors(400, 401, 404, 429, 503) },
      }),
    },
  };
}

const deliveryHeader = (description: string, pattern?: string): SchemaObject => ({ required: true, description, schema: pattern ? { type: 'string', pattern } : { type: 'string' } });

/** What the delivery process sends to a subscription's URL (OpenAPI 3.1 `webhooks`). */
export function outgoingWebhooks(): Record<string, SchemaObject> {
  return {
    event: {
      post: {
        operationId: 'receiveEvent',
        tags: ['webhooks'],
        summary: 'An event delivered to your endpoint',
        description:
          'A signed HTTPS POST per (event, subscription). Verify `X-Service-Signature` (HMAC-SHA256 of the raw body keyed with the whole `whsec_` secret) with a constant-time comparison, or the Standard Webhooks headers. Answer 2xx within 4 s. Anything else (another status, a redirect, a timeout) is retried on a backoff schedule with the same delivery id; duplicates are possible, so deduplicate by `X-Service-Delivery` or the event id.',
        parameters: [
          { name: 'X-Service-Signature', in: 'header', ...deliveryHeader('`sha256=` + hex HMAC-SHA256 of the raw body, keyed with the `whsec_` secret (the current one; during a rotation\'s grace period the old one is only in `webhook-signature`)', '^sha256=[0-9a-f]{64}$') },
          { name: 'X-Service-Event', in: 'header', ...deliveryHeader('The event type') },
          { name: 'X-Service-Delivery', in: 'header', ...deliveryHeader('The delivery id, the same on every retry') },
          { name: 'webhook-id', in: 'header', ...deliveryHeader('Standard Webhooks: the delivery id') },
          { name: 'webhook-timestamp', in: 'header', ...deliveryHeader('Standard Webhooks: unix seconds of this attempt', '^[0-9]+$') },
          {
            name: 'webhook-signature',
            in: 'header',
            ...deliveryHeader('Standard Webhooks: `v1,` + base64 HMAC-SHA256 of `id.timestamp.body`, keyed with the base64-decoded secret after `whsec_`; during a secret rotation\'s grace period two such values, space-separated (new secret first, then the replaced one)', '^v1,'),
          },
        ],
        requestBody: { required: true, content: { 'application/json': { schema: ref('EventRecord') } } },
        responses: { '2XX': { description: 'Received; not retried' }, default: { description: 'Any other answer (or none within 4 s) is a failed attempt, retried later' } },
      },
    },
  };
}
