import { EVENT_ID, MAX_EVENT_ATTEMPTS, MAX_EVENT_DELIVERIES, MAX_STATS_ATTEMPTS, statsQuery } from '../../activity/schemas.js';
import { WEBHOOK_ID } from '../../webhooks/schemas.js';
import { authedJson, errors, ref, USER_SECURITY } from '../components.js';
import { queryParameters, type SchemaObject } from '../convert.js';

const webhookIdParam = { name: 'id', in: 'path', required: true, description: 'The subscription id (any other account\'s id, or a malformed one, is a 404)', schema: { type: 'string', pattern: WEBHOOK_ID.source } };
const eventIdParam = { name: 'id', in: 'path', required: true, description: 'The event id (another account\'s, a malformed one, or one not yet stored is a 404)', schema: { type: 'string', pattern: EVENT_ID.source } };

const count = (description: string): SchemaObject => ({ type: 'integer', minimum: 0, description });
const counts = {
  succeeded: count('Attempts that got a 2xx (each is a delivery that finished)'),
  failed: count('Failed attempts that were the last of their delivery (it gave up)'),
  retrying: count('Failed attempts after which another attempt was scheduled'),
};

/** Response schemas of the activity endpoints (added to components.schemas). */
export const activitySchemas: Record<string, SchemaObject> = {
  WebhookStats: {
    type: 'object',
    required: ['webhook_id', 'window', 'from', 'to', 'bucket_seconds', 'totals', 'latency_ms', 'buckets', 'truncated'],
    properties: {
      webhook_id: { type: 'string', pattern: WEBHOOK_ID.source },
      window: { type: 'string', enum: ['1h', '24h'] },
      from: { type: 'string', format: 'date-time', description: 'Start of the first bucket (inclusive)' },
      to: { type: 'string', format: 'date-time', description: 'End of the last bucket (exclusive); the last bucket holds now' },
      bucket_seconds: { type: 'integer', enum: [300, 3600] },
      totals: {
        type: 'object',
        required: ['succeeded', 'failed', 'retrying', 'attempts'],
        properties: { ...counts, attempts: count('Attempts counted (the sum of the three)') },
      },
      latency_ms: {
        type: 'object',
        required: ['p50', 'p99'],
        description: 'Nearest-rank percentiles of the counted attempts\' durations (successes and failures alike); null when there were none',
        properties: { p50: { type: ['integer', 'null'], minimum: 0 }, p99: { type: ['integer', 'null'], minimum: 0 } },
      },
      buckets: {
        type: 'array',
        description: 'Oldest first: 12 of 5 minutes (1h) or 24 of an hour (24h), edges aligned to the bucket size',
        items: { type: 'object', required: ['start', 'succeeded', 'failed', 'retrying'], properties: { start: { type: 'string', format: 'date-time' }, ...counts } },
      },
      truncated: { type: 'boolean', description: `true when the window held more than ${MAX_STATS_ATTEMPTS} attempts: only the most recent ${MAX_STATS_ATTEMPTS} are counted` },
    },
  },
  EventDelivery: {
    type: 'object',
    required: ['id', 'webhook_id', 'url', 'state', 'attempts_made', 'next_attempt_at', 'last_status', 'last_outcome', 'created_at', 'updated_at', 'attempts'],
    properties: {
      id: { type: 'string', description: 'The delivery id (X-Service-Delivery, webhook-id)' },
      webhook_id: { type: 'string', pattern: WEBHOOK_ID.source },
      url: { type: ['string', 'null'], description: 'The subscription\'s URL now; null when it has been deleted' },
      state: { type: 'string', enum: ['pending', 'succeeded', 'failed'], description: '`pending`: queued or waiting for its next attempt' },
      attempts_made: { type: 'integer', minimum: 0 },
      next_attempt_at: { type: ['string', 'null'], format: 'date-time' },
      last_status: { type: ['integer', 'null'] },
      last_outcome: { type: ['string', 'null'] },
      created_at: { type: 'string', format: 'date-time' },
      updated_at: { type: 'string', format: 'date-time' },
      attempts: { type: 'array', items: ref('DeliveryAttempt'), description: 'Oldest first' },
    },
  },
  EventDeliveries: {
    type: 'object',
    required: ['event', 'deliveries', 'truncated'],
    properties: {
      event: ref('EventRecord'),
      deliveries: { type: 'array', items: ref('EventDelivery'), description: 'One per subscription the event went to, oldest first' },
      truncated: { type: 'boolean', description: `true when more than ${MAX_EVENT_DELIVERIES} deliveries or ${MAX_EVENT_ATTEMPTS} attempts in all: the oldest are shown` },
    },
  },
};

/** Read-only delivery activity: a subscription's stats, an event's deliveries. */
export function activityPaths(): Record<string, SchemaObject> {
  const op = (operationId: string, tag: string, summary: string, rest: SchemaObject): SchemaObject => ({ operationId, tags: [tag], summary, security: USER_SECURITY, ...rest });
  return {
    '/api/v1/webhooks/{id}/stats': {
      parameters: [webhookIdParam],
      get: op('getWebhookStats', 'webhooks', 'Delivery counts and latency of a subscription over the last hour or day', {
        description: `Computed from the stored attempts of the window, at most the ${MAX_STATS_ATTEMPTS} most recent (\`truncated\` says when more were left out). Each attempt counts once, in the bucket of its start: as \`succeeded\`, \`retrying\` or \`failed\`.`,
        parameters: queryParameters(statsQuery, { window: '`1h` (12 buckets of 5 minutes) or `24h` (24 buckets of an hour)' }),
        responses: { '200': authedJson('The stats', ref('WebhookStats')), ...errors(400, 401, 404, 429, 503) },
      }),
    },
    '/api/v1/events/{id}/deliveries': {
      parameters: [eventIdParam],
      get: op('getEventDeliveries', 'events', 'One event with its deliveries and their attempts', {
        description: `The event as polling returns it, and each delivery made for it (one per subscription it matched) with its state and attempts (status, duration, outcome). At most ${MAX_EVENT_DELIVERIES} deliveries and ${MAX_EVENT_ATTEMPTS} attempts.`,
        responses: { '200': authedJson('The event and its deliveries', ref('EventDeliveries')), ...errors(401, 404, 429, 503) },
      }),
    },
  };
}
