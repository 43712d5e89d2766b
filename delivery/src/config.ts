import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { type BaseConfig, ConfigError, type Env, loadBaseConfig, read } from '#shared/config/index.js';
import { loadMetricsConfig, type MetricsConfig } from '#shared/config/metrics.js';
import { loadWebhookConfig, type WebhookConfig } from '#shared/config/webhooks.js';
import { DEFAULT_DISABLE_AFTER_MS } from './endpoint-health.js';
import { DEFAULT_SCHEDULE, parseSchedule } from './retry-policy.js';

export interface DeliveryConfig extends BaseConfig {
  instanceId: string;
  groupId: string;
  /**
   * Where a delivery group with no committed offsets starts: 'latest' (the
   * default: a fresh deployment sends nothing of the log's past) or
   * 'earliest' (replay the log; subscriptions still get only events that
   * occurred after they were created).
   */
  startFrom: 'latest' | 'earliest';
  webhooks: WebhookConfig & {
    /** Extra trusted CA certificates (PEM), added to Node's roots; for test receivers with a private CA. */
    caPem: string | null;
    /** Delays before retry 1, 2, …; a delivery gives up after the last one. */
    retrySchedule: number[];
    /** Attempts in flight at once in this process. */
    concurrency: number;
    /** Attempts in flight at once to one subscription. */
    concurrencyPerSubscription: number;
    /** Keep-alive connections to one receiver origin (scheme, host, port) per process. */
    socketsPerOrigin: number;
    /** How long a claimed delivery stays reserved for this process. */
    leaseMs: number;
    /** How often due retries (and expired leases of crashed processes) are looked for. */
    pollIntervalMs: number;
    /** Attempts and finished deliveries older than this are deleted. */
    retentionMs: number;
    /** A subscription whose attempts all failed for this long is disabled (endpoint-health.ts); null: never. */
    disableAfterMs: number | null;
  };
  metrics: MetricsConfig & {
    /** Where GET /metrics listens; port 0 means no metrics server. */
    host: string;
    port: number;
    /** How often the delivery-queue gauges are counted in MongoDB. */
    sampleIntervalMs: number;
  };
}

/** docs/spec.md section 6: an attempt times out after 4 seconds. */
export const ATTEMPT_TIMEOUT_MS = 4000;

function readCa(env: Env): string | null {
  const path = read.optionalStr(env, 'WEBHOOK_CA_FILE');
  if (path === undefined) return null;
  let pem: string;
  try {
    pem = readFileSync(path, 'utf8');
  } catch (err) {
    throw new ConfigError('WEBHOOK_CA_FILE', `cannot be read (${(err as Error).message})`);
  }
  if (!pem.includes('-----BEGIN CERTIFICATE-----')) throw new ConfigError('WEBHOOK_CA_FILE', 'must contain PEM certificates');
  return pem;
}

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** WEBHOOK_DISABLE_AFTER: a duration like the retry schedule's steps, or days ("5d"), 1 s to 365 d; "off": never. */
function parseDisableAfter(env: Env): number | null {
  const text = read.optionalStr(env, 'WEBHOOK_DISABLE_AFTER');
  if (text === undefined) return DEFAULT_DISABLE_AFTER_MS;
  if (text.trim() === 'off') return null;
  const m = /^(\d{1,7})(ms|s|m|h|d)$/.exec(text.trim());
  if (!m) throw new ConfigError('WEBHOOK_DISABLE_AFTER', `has a bad duration "${text}" (want e.g. 5d, 12h, 30m, 2s, or off)`);
  const ms = Number(m[1]) * (DURATION_UNITS[m[2] as string] as number);
  if (ms < 1000 || ms > 365 * DURATION_UNITS.d!) throw new ConfigError('WEBHOOK_DISABLE_AFTER', 'must be between 1s and 365d (or off)');
  return ms;
}

export function loadDeliveryConfig(env: Env): DeliveryConfig {
  const base = loadBaseConfig(env, 'event-delivery');
  let retrySchedule = DEFAULT_SCHEDULE;
  const rawSchedule = read.optionalStr(env, 'WEBHOOK_RETRY_SCHEDULE');
  if (rawSchedule !== undefined) {
    try {
      retrySchedule = parseSchedule(rawSchedule);
    } catch (err) {
      throw new ConfigError('WEBHOOK_RETRY_SCHEDULE', (err as Error).message);
    }
  }
  return {
    ...base,
    instanceId: read.str(env, 'INSTANCE_ID', `delivery-${randomUUID().slice(0, 8)}`),
    // Per (topic, database), like the materializer: offsets mean "recorded in this database".
    groupId: read.str(env, 'DELIVERY_GROUP_ID', `${base.kafka.eventsTopic}.delivery.${base.mongo.dbName}`),
    startFrom: read.oneOf(env, 'DELIVERY_START_FROM', ['latest', 'earliest'] as const, 'latest'),
    webhooks: {
      ...loadWebhookConfig(env, base.production),
      caPem: readCa(env),
      retrySchedule,
      concurrency: read.int(env, 'WEBHOOK_CONCURRENCY', 256, 1, 10_000),
      concurrencyPerSubscription: read.int(env, 'WEBHOOK_CONCURRENCY_PER_SUBSCRIPTION', 32, 1, 10_000),
      socketsPerOrigin: read.int(env, 'WEBHOOK_SOCKETS_PER_ORIGIN', 128, 1, 10_000),
      // Longer than one attempt (4 s) with room for the bookkeeping writes around it.
      leaseMs: read.int(env, 'WEBHOOK_LEASE_MS', 30_000, 2 * ATTEMPT_TIMEOUT_MS, 3_600_000),
      pollIntervalMs: read.int(env, 'WEBHOOK_POLL_INTERVAL_MS', 500, 50, 60_000),
      retentionMs: read.int(env, 'WEBHOOK_RETENTION_DAYS', 30, 1, 3650) * 24 * 3600 * 1000,
      disableAfterMs: parseDisableAfter(env),
    },
    metrics: {
      ...loadMetricsConfig(env),
      host: read.str(env, 'HOST', '127.0.0.1'),
      port: read.int(env, 'METRICS_PORT', 9464, 0, 65535),
      sampleIntervalMs: read.int(env, 'METRICS_SAMPLE_INTERVAL_MS', 15_000, 100, 3_600_000),
    },
  };
}
