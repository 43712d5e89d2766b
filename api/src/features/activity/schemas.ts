import { component, DateTime, EventRecordSchema, Nullable, type Static, Type } from '../../shapes.js';
import { queryValidator } from '../../validation.js';
import { DeliveryAttemptSchema, TriggerSchema, WEBHOOK_ID } from '../webhooks/index.js';

/** Event ids: `evt_` + 24 hex characters. Anything else cannot exist: 404. */
export const EVENT_ID = /^evt_[0-9a-f]{24}$/;

/**
 * The stats windows and their buckets: the last hour in 12 buckets of 5
 * minutes, the last day in 24 buckets of an hour. Bucket edges are aligned
 * to the bucket size, so a refresh moves the chart by whole buckets.
 */
export const STATS_WINDOWS = {
  '1h': { windowMs: 60 * 60_000, bucketMs: 5 * 60_000 },
  '24h': { windowMs: 24 * 60 * 60_000, bucketMs: 60 * 60_000 },
} as const;

export type StatsWindow = keyof typeof STATS_WINDOWS;

/** At most this many attempts (the most recent of the window) are read for one stats answer. */
export const MAX_STATS_ATTEMPTS = 10_000;

/** At most this many deliveries of one event (one per subscription: the account's cap bounds it further). */
export const MAX_EVENT_DELIVERIES = 100;

/** At most this many attempts over all deliveries of one event (the oldest first). */
export const MAX_EVENT_ATTEMPTS = 1000;

export const StatsQuery = Type.Object(
  {
    window: Type.Optional(
      Type.Unsafe<StatsWindow>({ type: 'string', enum: Object.keys(STATS_WINDOWS), default: '1h', description: '`1h` (12 buckets of 5 minutes) or `24h` (24 buckets of an hour)' }),
    ),
  },
  { additionalProperties: false },
);
export type StatsQuery = { window: StatsWindow }; // the default fills it in
export const statsQuery = queryValidator<StatsQuery>(StatsQuery);

export const EventIdParams = Type.Object({
  id: Type.String({ pattern: EVENT_ID.source, description: "The event id (another account's, a malformed one, or one not yet stored is a 404)" }),
});

const count = (description: string) => Type.Integer({ minimum: 0, description });
const counts = {
  succeeded: count('Attempts that got a 2xx (each is a delivery that finished)'),
  failed: count('Failed attempts that were the last of their delivery (it gave up)'),
  retrying: count('Failed attempts after which another attempt was scheduled'),
};

export const WebhookStatsSchema = component(
  'WebhookStats',
  Type.Object({
    webhook_id: Type.String({ pattern: WEBHOOK_ID.source }),
    window: Type.Unsafe<StatsWindow>({ type: 'string', enum: Object.keys(STATS_WINDOWS) }),
    from: DateTime('Start of the first bucket (inclusive)'),
    to: DateTime('End of the last bucket (exclusive); the last bucket holds now'),
    bucket_seconds: Type.Integer({ minimum: 1 }),
    totals: Type.Object({ ...counts, attempts: count('Attempts counted (the sum of the three)') }),
    latency_ms: Type.Object(
      { p50: Nullable(Type.Integer({ minimum: 0 })), p99: Nullable(Type.Integer({ minimum: 0 })) },
      { description: "Nearest-rank percentiles of the counted attempts' durations (successes and failures alike); null when there were none" },
    ),
    buckets: Type.Array(Type.Object({ start: DateTime(), ...counts }), { description: 'Oldest first: 12 of 5 minutes (1h) or 24 of an hour (24h), edges aligned to the bucket size' }),
    truncated: Type.Boolean({ description: `true when the window held more than ${MAX_STATS_ATTEMPTS} attempts: only the most recent ${MAX_STATS_ATTEMPTS} are counted` }),
  }),
);

const EventDeliverySchema = component(
  'EventDelivery',
  Type.Object({
    id: Type.String({ description: 'The delivery id (X-Service-Delivery, webhook-id)' }),
    webhook_id: Type.String({ pattern: WEBHOOK_ID.source }),
    url: Nullable(Type.String(), { description: "The subscription's URL now; null when it has been deleted" }),
    state: Type.Unsafe<'pending' | 'succeeded' | 'failed'>({ type: 'string', enum: ['pending', 'succeeded', 'failed'], description: '`pending`: queued or waiting for its next attempt' }),
    attempts_made: Type.Integer({ minimum: 0 }),
    next_attempt_at: Nullable(DateTime()),
    last_status: Nullable(Type.Integer()),
    last_outcome: Nullable(Type.String()),
    created_at: DateTime(),
    updated_at: DateTime(),
    trigger: TriggerSchema,
    attempts: Type.Array(DeliveryAttemptSchema, { description: 'Oldest first' }),
  }),
);

export const EventDeliveriesSchema = component(
  'EventDeliveries',
  Type.Object({
    event: EventRecordSchema,
    deliveries: Type.Array(EventDeliverySchema, { description: 'One per subscription the event went to, oldest first' }),
    truncated: Type.Boolean({ description: `true when more than ${MAX_EVENT_DELIVERIES} deliveries or ${MAX_EVENT_ATTEMPTS} attempts in all: the oldest are shown` }),
  }),
);

/** Delivery search: attempts per page, by default and at most (the same as a subscription's listing). */
export const SEARCH_DEFAULT_LIMIT = 50;
export const SEARCH_MAX_LIMIT = 200;
/** Delivery search: stored attempts examined per request at most, matching or not (the scan bound). */
export const SEARCH_MAX_SCAN = 1000;

/** An attempt's outcomes, as the attempt's shape lists them (the `outcome` filter also takes `failed`: every outcome but `ok`). */
export const ATTEMPT_OUTCOMES: readonly string[] = (DeliveryAttemptSchema.properties.outcome as unknown as { enum: string[] }).enum;

/** A status filter: one status (`404`), a class (`5xx`) or an inclusive range (`500-503`). */
export const STATUS_FILTER = /^(?:[1-5][0-9]{2}|[1-5]xx|[1-5][0-9]{2}-[1-5][0-9]{2})$/;

const csv = (description: string) => Type.String({ minLength: 1, maxLength: 400, description });

export const DeliverySearchQuery = Type.Object(
  {
    outcome: Type.Optional(csv(`Only attempts with one of these outcomes, comma-separated: ${ATTEMPT_OUTCOMES.join(', ')}, or \`failed\` (every outcome but \`ok\`)`)),
    status: Type.Optional(
      Type.String({
        pattern: STATUS_FILTER.source,
        description: 'Only attempts that got an HTTP status in this range: one status (`404`), a class (`5xx`: 500 to 599) or an inclusive range (`400-429`). An attempt that got no status (timeout, connection failure) never matches',
      }),
    ),
    event_type: Type.Optional(csv('Only attempts of deliveries of these event types, comma-separated')),
    webhook_id: Type.Optional(Type.String({ pattern: WEBHOOK_ID.source, description: "Only this subscription's attempts (another account's, or an unknown one, is a 404)" })),
    from: Type.Optional(DateTime('Only attempts made at or after this time (inclusive)')),
    to: Type.Optional(DateTime('Only attempts made before this time (exclusive)')),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: SEARCH_MAX_LIMIT, default: SEARCH_DEFAULT_LIMIT, description: 'Most attempts to return' })),
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: '`next_cursor` of the previous page, with the same filters: the search continues strictly after the last attempt that page examined' })),
  },
  { additionalProperties: false },
);
export type DeliverySearchQuery = Omit<Static<typeof DeliverySearchQuery>, 'limit'> & { limit: number }; // the default fills it in
export const deliverySearchQuery = queryValidator<DeliverySearchQuery>(DeliverySearchQuery);

const DeliverySearchAttemptSchema = component(
  'DeliverySearchAttempt',
  Type.Object({ ...DeliveryAttemptSchema.properties, webhook_id: Type.String({ pattern: WEBHOOK_ID.source, description: 'The subscription the attempt was made for' }) }),
);

export const DeliverySearchSchema = component(
  'DeliverySearch',
  Type.Object({
    attempts: Type.Array(DeliverySearchAttemptSchema, { description: 'Matching attempts, newest first ((at, id) descending)' }),
    next_cursor: Nullable(Type.String(), {
      description: `Pass it as \`cursor\` (with the same filters) for the next page; null when no attempt in the range is left to examine. A page examines at most ${SEARCH_MAX_SCAN} stored attempts, so with narrow filters it may hold fewer than \`limit\` (even none) and still have a next_cursor`,
    }),
  }),
);
