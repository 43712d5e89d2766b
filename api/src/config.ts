import { randomUUID } from 'node:crypto';
import { type BaseConfig, ConfigError, type Env, loadBaseConfig, read } from '../../shared/src/config/index.js';
import { loadMetricsConfig, type MetricsConfig } from '../../shared/src/config/metrics.js';
import { loadWebhookConfig, type WebhookConfig } from '../../shared/src/config/webhooks.js';

export interface ApiConfig extends BaseConfig {
  instanceId: string;
  http: {
    host: string;
    port: number;
    /** JSON body limit for the public API. */
    bodyLimit: string;
    /** Larger limit for the producer ingest endpoint (batches of up to 1,000 events). */
    ingestBodyLimit: string;
    /** Read the client IP from X-Forwarded-For (only behind a trusted proxy). */
    trustProxy: boolean;
    /**
     * How many X-Forwarded-For entries, counted from the right, our own proxies
     * appended. The client IP is the leftmost of those; anything further left was
     * written by the client and is ignored.
     */
    proxyHops: number;
  };
  auth: {
    jwtSecret: string;
    sessionTtlSeconds: number;
  };
  /** Budgets shared by every API process (state in MongoDB). */
  limits: {
    apiKeyPerMinute: number;
    sessionPerMinute: number;
    signupPerHour: number;
    loginPerMinute: number;
  };
  ingestToken: string;
  events: {
    /** Most events in one ingest request. */
    ingestMaxBatch: number;
    /** Most bytes of one event's `data`, serialized as JSON. */
    ingestMaxDataBytes: number;
    /** How long the producer lets the first waiting event wait for company. */
    producerLingerMs: number;
    /** How long an ingest may wait for Kafka's acknowledgement before it is answered 503. */
    produceTimeoutMs: number;
    longPollMaxMs: number;
    /** timeout_ms of a long-poll that gives none. */
    longPollDefaultMs: number;
    /** How long a resume may wait for the materializer to catch up before answering 503. */
    handoffTimeoutMs: number;
    materializerGroupId: string;
    /** Each process's fan-out group is this prefix + instance id + a random suffix. */
    fanoutGroupPrefix: string;
    /** The tail window kept by each process, per partition: most events and bytes (0 turns it off). */
    tailWindowEvents: number;
    tailWindowBytes: number;
  };
  streams: {
    durationMs: number;
    heartbeatMs: number;
    /** The `retry:` hint sent to EventSource clients. */
    retryMs: number;
    tokenTtlSeconds: number;
    maxPerAccount: number;
  };
  webhooks: WebhookConfig & {
    /** Subscriptions one account may have. */
    maxPerAccount: number;
  };
  mcp: {
    /**
     * Browser origins allowed to call /api/mcp (exact `scheme://host[:port]`).
     * Requests without an Origin header (every non-browser MCP client) are
     * always allowed; any other Origin is refused with 403.
     */
    allowedOrigins: string[];
  };
  metrics: MetricsConfig;
}

const DEV_JWT_SECRET = 'dev-only-jwt-secret-change-me-0000';
/** Exported for scripts/emit.ts, which talks to a local API by default. */
export const DEV_INGEST_TOKEN = 'dev-only-ingest-token-change-me-000';

export function loadApiConfig(env: Env): ApiConfig {
  const base = loadBaseConfig(env, 'event-api');
  const config: ApiConfig = {
    ...base,
    instanceId: read.str(env, 'INSTANCE_ID', `api-${randomUUID().slice(0, 8)}`),
    http: {
      host: read.str(env, 'HOST', '127.0.0.1'),
      port: read.int(env, 'PORT', 3000, 0, 65535),
      bodyLimit: read.str(env, 'BODY_LIMIT', '1mb'),
      ingestBodyLimit: read.str(env, 'INGEST_BODY_LIMIT', '16mb'),
      trustProxy: read.bool(env, 'TRUST_PROXY', false),
      proxyHops: read.int(env, 'TRUST_PROXY_HOPS', 1, 1, 10),
    },
    auth: {
      jwtSecret: read.secret(env, 'JWT_SECRET', base.production, DEV_JWT_SECRET, 32),
      sessionTtlSeconds: 30 * 24 * 3600,
    },
    limits: {
      apiKeyPerMinute: read.int(env, 'API_KEY_LIMIT_PER_MINUTE', 100, 1, 1_000_000),
      sessionPerMinute: read.int(env, 'SESSION_LIMIT_PER_MINUTE', 600, 1, 1_000_000),
      signupPerHour: read.int(env, 'SIGNUP_LIMIT_PER_HOUR', 10, 1, 1_000_000),
      loginPerMinute: read.int(env, 'LOGIN_LIMIT_PER_MINUTE', 30, 1, 1_000_000),
    },
    ingestToken: read.secret(env, 'INGEST_TOKEN', base.production, DEV_INGEST_TOKEN, 24),
    events: {
      ingestMaxBatch: read.int(env, 'INGEST_MAX_BATCH', 1000, 1, 10_000),
      ingestMaxDataBytes: read.int(env, 'INGEST_MAX_DATA_BYTES', 64 * 1024, 1024, 512 * 1024),
      producerLingerMs: read.int(env, 'PRODUCER_LINGER_MS', 2, 0, 100),
      produceTimeoutMs: read.int(env, 'PRODUCE_TIMEOUT_MS', 10_000, 1000, 120_000),
      longPollMaxMs: read.int(env, 'LONG_POLL_MAX_MS', 55_000, 1000, 55_000),
      longPollDefaultMs: read.int(env, 'LONG_POLL_DEFAULT_MS', 30_000, 0, 55_000),
      handoffTimeoutMs: read.int(env, 'HANDOFF_TIMEOUT_MS', 5000, 100, 60_000),
      // One group per (topic, database): its committed offsets mean "written into
      // this database", so a process pointed at another database never takes
      // partitions away from the real materializers.
      materializerGroupId: `${base.kafka.eventsTopic}.materializer.${base.mongo.dbName}`,
      fanoutGroupPrefix: `${base.kafka.eventsTopic}.fanout`,
      tailWindowEvents: read.int(env, 'TAIL_WINDOW_EVENTS', 10_000, 0, 1_000_000),
      tailWindowBytes: read.int(env, 'TAIL_WINDOW_BYTES', 2 * 1024 * 1024, 0, 1024 * 1024 * 1024),
    },
    streams: {
      durationMs: read.int(env, 'STREAM_DURATION_MS', 50_000, 1000, 55_000),
      heartbeatMs: read.int(env, 'STREAM_HEARTBEAT_MS', 15_000, 100, 60_000),
      retryMs: 3000,
      tokenTtlSeconds: read.int(env, 'STREAM_TOKEN_TTL_S', 120, 10, 3600),
      maxPerAccount: read.int(env, 'MAX_STREAMS_PER_ACCOUNT', 6, 1, 100),
    },
    webhooks: {
      ...loadWebhookConfig(env, base.production),
      maxPerAccount: read.int(env, 'WEBHOOK_MAX_PER_ACCOUNT', 50, 1, 10_000),
    },
    mcp: {
      allowedOrigins: parseOrigins(read.str(env, 'MCP_ALLOWED_ORIGINS', '')),
    },
    metrics: loadMetricsConfig(env),
  };
  if (config.events.longPollDefaultMs > config.events.longPollMaxMs) {
    throw new ConfigError('LONG_POLL_DEFAULT_MS', `must not exceed LONG_POLL_MAX_MS (${config.events.longPollMaxMs})`);
  }
  return config;
}

/** Comma-separated origins, each normalised the way browsers send them (lower-case, no default port). */
function parseOrigins(raw: string): string[] {
  const origins: string[] = [];
  for (const entry of raw.split(',').map((o) => o.trim()).filter(Boolean)) {
    let url: URL;
    try {
      url = new URL(entry);
    } catch {
      throw new ConfigError('MCP_ALLOWED_ORIGINS', `has a bad entry "${entry}" (want scheme://host[:port])`);
    }
    const bare = url.pathname === '/' && !url.search && !url.hash && !url.username && !url.password;
    if (!['http:', 'https:'].includes(url.protocol) || !bare) {
      throw new ConfigError('MCP_ALLOWED_ORIGINS', `has a bad entry "${entry}" (want scheme://host[:port], no path)`);
    }
    origins.push(url.origin);
  }
  return origins;
}
