import { queryValidator } from '../../validation.js';

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

export interface StatsQuery {
  window: StatsWindow;
}

export const statsQuery = queryValidator<StatsQuery>({
  type: 'object',
  additionalProperties: false,
  properties: {
    window: { type: 'string', enum: Object.keys(STATS_WINDOWS), default: '1h' },
  },
});
