import { randomUUID } from 'node:crypto';
import { type BaseConfig, ConfigError, type Env, loadBaseConfig, read } from '#shared/config/index.js';
import { loadMetricsConfig, type MetricsConfig } from '#shared/config/metrics.js';
import { isDevWebhookKey, loadWebhookConfig, type WebhookConfig } from '#shared/config/webhooks.js';

export interface ApiConfig extends BaseConfig {
  instanceId: string;
  http: {
    host: string;
    port: number;
    /** JSON body limit for the public API. */
    bodyLimit: string;
    /** Larger limit for the producer ingest endpoint (batches of up to 1,000 events). */
    ingestBodyLimit: string;
    /**
     * Node's requestTimeout: the whole request (headers and body) must have
     * arrived within this, or the connection gets 408 and is closed. It stops
     * counting once the request is in, so long-polls and streams are not cut.
     */
    requestTimeoutMs: number;
    /** Node's headersTimeout: the request line and headers must have arrived within this. */
    headersTimeoutMs: number;
    /**
     * The listen backlog: connections the kernel completes before the process
     * accepts them (capped by net.core.somaxconn). Node's 511 overflows when
     * thousands of long-poll and stream clients connect at once.
     */
    listenBacklog: number;
    /** Read the client IP from X-Forwarded-For (only behind a trusted proxy). */
    trustProxy: boolean;
    /**
     * How many X-Forwarded-For entries, counted from the right, our own proxies
     * appended. The client IP is the leftmost of those; anything further left was
     * written by the client and is ignored.
     */
    proxyHops: number;
    /**
     * PUBLIC_BASE_URL: where clients reach this API (`https://api.example.com`,
     * maybe with a path prefix), for the URLs it hands out (`stream_url`).
     * Null: those URLs are relative. Never taken from Host / X-Forwarded-Host.
     */
    publicBaseUrl: string | null;
  };
  auth: {
    jwtSecret: string;
    sessionTtlSeconds: number;
    /** scrypt cost of new hashes (r=8, p=1); at least the OWASP floor 2^17 in production. */
    scryptN: number;
    /** Password derivations run at once by this process; the others queue. */
    hashConcurrency: number;
    /** Derivations that may queue; beyond, logins and signups get 503 with Retry-After. */
    hashQueue: number;
    /** The per-process API key cache (features/keys/cache.ts); syncMs 0 turns it off. */
    keyCache: { syncMs: number; leaseMs: number; maxEntries: number };
  };
  /** Budgets shared by every API process (state in MongoDB). */
  limits: {
    apiKeyPerMinute: number;
    sessionPerMinute: number;
    signupPerHour: number;
    loginPerMinute: number;
    /** Failed logins per email (existing or not) in one window, from any address. */
    loginFailuresPerAccount: number;
    loginAccountWindowSeconds: number;
    /**
     * API-key and session requests admitted locally are written this often
     * (ms); 0 writes every request (exact). docs/api.md, "Limits".
     */
    flushMs: number;
  };
  ingestToken: string;
  events: {
    /** Most events in one ingest request. */
    ingestMaxBatch: number;
    /** Most bytes of one event's `data`, serialized as JSON. */
    ingestMaxDataBytes: number;
    /** 1 in this many successful ingest requests is logged at info (1: every one). */
    ingestLogEvery: number;
    /**
     * How long the producer lets the first waiting event wait for company. 0 (the default):
     * an event goes at once when no send is in flight, and those that arrive during a send
     * go together right after it (batches form under load, no timer at low rates).
     */
    producerLingerMs: number;
    /** How long an ingest may wait for Kafka's acknowledgement before it is answered 503. */
    produceTimeoutMs: number;
    longPollMaxMs: number;
    /** Long-polls one account may hold open at once in one API process (429 beyond). */
    maxLongPollsPerAccount: number;
    /** timeout_ms of a long-poll that gives none. */
    longPollDefaultMs: number;
    /** How long a resume may wait for the materializer to catch up before answering 503. */
    handoffTimeoutMs: number;
    materializerGroupId: string;
    /** MATERIALIZER_ENABLED (default true): this process joins the materializer group. Off, it writes no history and costs only what its own readers do; at least one API process of the deployment must keep it on. */
    materializerEnabled: boolean;
    /** Most events the materializer writes as one chunk (MATERIALIZER_CHUNK_EVENTS, default 500): bigger chunks drain a backlog faster, at a cost to others writing to the same store. */
    materializerChunkEvents: number;
    /** How long a materializer fetch may wait to fill (MATERIALIZER_FETCH_WAIT_MS; 0: answered as soon as anything is there). Fewer, bigger chunks cost the store less per event, for at most this much more lag of history. */
    materializerFetchWaitMs: number;
    /** Each process's fan-out group is this prefix + instance id + a random suffix. */
    fanoutGroupPrefix: string;
    /** The tail window kept by each process, per partition: most events and bytes (0 turns it off). */
    tailWindowEvents: number;
    tailWindowBytes: number;
    /** FANOUT_DORMANT_MS: the fan-out pauses every partition after this long with no reader and no read (0: never). */
    fanoutDormantMs: number;
    /** Heap each process may give to copies of full history pages and directories (0: none kept). */
    historyCacheBytes: number;
  };
  streams: {
    durationMs: number;
    heartbeatMs: number;
    /** The `retry:` hint sent to EventSource clients. */
    retryMs: number;
    tokenTtlSeconds: number;
    maxPerAccount: number;
    /** Live events one stream may have queued for a reader that is not keeping up before it is ended (it resumes by cursor). */
    queueEvents: number;
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
      requestTimeoutMs: read.int(env, 'HTTP_REQUEST_TIMEOUT_MS', 30_000, 100, 600_000),
      headersTimeoutMs: read.int(env, 'HTTP_HEADERS_TIMEOUT_MS', 20_000, 100, 600_000),
      listenBacklog: read.int(env, 'HTTP_LISTEN_BACKLOG', 4096, 1, 65_535),
      trustProxy: read.bool(env, 'TRUST_PROXY', false),
      proxyHops: read.int(env, 'TRUST_PROXY_HOPS', 1, 1, 10),
      publicBaseUrl: parsePublicBaseUrl(read.optionalStr(env, 'PUBLIC_BASE_URL')),
    },
    auth: {
      jwtSecret: read.secret(env, 'JWT_SECRET', base.development, DEV_JWT_SECRET, 32),
      sessionTtlSeconds: 30 * 24 * 3600,
      scryptN: readScryptN(env, base.production),
      hashConcurrency: read.int(env, 'PASSWORD_HASH_CONCURRENCY', 2, 1, 64),
      hashQueue: read.int(env, 'PASSWORD_HASH_QUEUE', 32, 0, 1_000_000),
      keyCache: {
        syncMs: read.int(env, 'KEY_CACHE_SYNC_MS', 200, 0, 10_000),
        leaseMs: read.int(env, 'KEY_CACHE_LEASE_MS', 2000, 100, 60_000),
        maxEntries: read.int(env, 'KEY_CACHE_ENTRIES', 10_000, 0, 10_000_000),
      },
    },
    limits: {
      apiKeyPerMinute: read.int(env, 'API_KEY_LIMIT_PER_MINUTE', 100, 1, 1_000_000),
      sessionPerMinute: read.int(env, 'SESSION_LIMIT_PER_MINUTE', 600, 1, 1_000_000),
      signupPerHour: read.int(env, 'SIGNUP_LIMIT_PER_HOUR', 10, 1, 1_000_000),
      loginPerMinute: read.int(env, 'LOGIN_LIMIT_PER_MINUTE', 30, 1, 1_000_000),
      loginFailuresPerAccount: read.int(env, 'LOGIN_FAILURES_PER_ACCOUNT', 10, 1, 1_000_000),
      loginAccountWindowSeconds: read.int(env, 'LOGIN_ACCOUNT_WINDOW_S', 900, 10, 86_400),
      flushMs: read.int(env, 'RATE_LIMIT_FLUSH_MS', 1000, 0, 60_000),
    },
    ingestToken: read.secret(env, 'INGEST_TOKEN', base.development, DEV_INGEST_TOKEN, 24),
    events: {
      ingestMaxBatch: read.int(env, 'INGEST_MAX_BATCH', 1000, 1, 10_000),
      ingestMaxDataBytes: read.int(env, 'INGEST_MAX_DATA_BYTES', 64 * 1024, 1024, 512 * 1024),
      ingestLogEvery: read.int(env, 'INGEST_LOG_EVERY', 100, 1, 1_000_000),
      producerLingerMs: read.int(env, 'PRODUCER_LINGER_MS', 0, 0, 100),
      produceTimeoutMs: read.int(env, 'PRODUCE_TIMEOUT_MS', 10_000, 1000, 120_000),
      longPollMaxMs: read.int(env, 'LONG_POLL_MAX_MS', 55_000, 1000, 55_000),
      maxLongPollsPerAccount: read.int(env, 'MAX_LONG_POLLS_PER_ACCOUNT', 50, 1, 1_000_000),
      longPollDefaultMs: read.int(env, 'LONG_POLL_DEFAULT_MS', 30_000, 0, 55_000),
      handoffTimeoutMs: read.int(env, 'HANDOFF_TIMEOUT_MS', 5000, 100, 60_000),
      // One group per (topic, database): its committed offsets mean "written into
      // this database", so a process pointed at another database never takes
      // partitions away from the real materializers.
      materializerGroupId: `${base.kafka.eventsTopic}.materializer.${base.mongo.dbName}`,
      materializerEnabled: read.bool(env, 'MATERIALIZER_ENABLED', true),
      materializerChunkEvents: read.int(env, 'MATERIALIZER_CHUNK_EVENTS', 500, 1, 100_000), // why 500: DEFAULT_CHUNK_EVENTS in event-store/materializer.ts
      materializerFetchWaitMs: read.int(env, 'MATERIALIZER_FETCH_WAIT_MS', 250, 0, 5_000), // why 250: docs/performance.md, "Fuller fetches for the materializer"
      fanoutGroupPrefix: `${base.kafka.eventsTopic}.fanout`,
      tailWindowEvents: read.int(env, 'TAIL_WINDOW_EVENTS', 10_000, 0, 1_000_000),
      tailWindowBytes: read.int(env, 'TAIL_WINDOW_BYTES', 2 * 1024 * 1024, 0, 1024 * 1024 * 1024),
      fanoutDormantMs: read.int(env, 'FANOUT_DORMANT_MS', 30_000, 0, 86_400_000),
      historyCacheBytes: read.int(env, 'HISTORY_CACHE_BYTES', 16 * 1024 * 1024, 0, 1024 * 1024 * 1024),
    },
    streams: {
      durationMs: read.int(env, 'STREAM_DURATION_MS', 50_000, 1000, 55_000),
      heartbeatMs: read.int(env, 'STREAM_HEARTBEAT_MS', 15_000, 100, 60_000),
      retryMs: 3000,
      tokenTtlSeconds: read.int(env, 'STREAM_TOKEN_TTL_S', 120, 10, 3600),
      maxPerAccount: read.int(env, 'MAX_STREAMS_PER_ACCOUNT', 6, 1, 100),
      queueEvents: read.int(env, 'STREAM_QUEUE_EVENTS', 50_000, 1, 1_000_000),
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
  // A public development default serves a loopback development process only.
  read.refuseDevDefault('JWT_SECRET', config.auth.jwtSecret === DEV_JWT_SECRET, base.production, config.http.host);
  read.refuseDevDefault('INGEST_TOKEN', config.ingestToken === DEV_INGEST_TOKEN, base.production, config.http.host);
  read.refuseDevDefault('WEBHOOK_SECRET_KEY', isDevWebhookKey(config.webhooks.secretKey), base.production, config.http.host);
  if (config.http.headersTimeoutMs > config.http.requestTimeoutMs) {
    throw new ConfigError('HTTP_HEADERS_TIMEOUT_MS', `must not exceed HTTP_REQUEST_TIMEOUT_MS (${config.http.requestTimeoutMs})`);
  }
  if (config.auth.keyCache.syncMs > 0 && config.auth.keyCache.leaseMs < 2 * config.auth.keyCache.syncMs) {
    throw new ConfigError('KEY_CACHE_LEASE_MS', `must be at least twice KEY_CACHE_SYNC_MS (${config.auth.keyCache.syncMs})`);
  }
  if (config.events.longPollDefaultMs > config.events.longPollMaxMs) {
    throw new ConfigError('LONG_POLL_DEFAULT_MS', `must not exceed LONG_POLL_MAX_MS (${config.events.longPollMaxMs})`);
  }
  return config;
}

/** The OWASP floor for scrypt's N (with r=8, p=1). */
const SCRYPT_N_FLOOR = 2 ** 17;

/**
 * PASSWORD_SCRYPT_N: a power of two. Lower values are for tests and local
 * development only (fast signups); production refuses anything under the floor.
 */
function readScryptN(env: Env, production: boolean): number {
  const n = read.int(env, 'PASSWORD_SCRYPT_N', SCRYPT_N_FLOOR, 1024, 2 ** 20);
  if ((n & (n - 1)) !== 0) throw new ConfigError('PASSWORD_SCRYPT_N', `must be a power of two, got ${n}`);
  if (production && n < SCRYPT_N_FLOOR) throw new ConfigError('PASSWORD_SCRYPT_N', `must be at least ${SCRYPT_N_FLOOR} (the OWASP floor) when NODE_ENV=production`);
  return n;
}

function parsePublicBaseUrl(raw: string | undefined): string | null {
  if (raw === undefined) return null;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new ConfigError('PUBLIC_BASE_URL', `is not a URL: "${raw}" (want https://host[:port][/prefix])`);
  }
  if (!['http:', 'https:'].includes(url.protocol) || url.search || url.hash || url.username || url.password) {
    throw new ConfigError('PUBLIC_BASE_URL', `must be http(s)://host[:port][/prefix] without query, fragment or credentials, got "${raw}"`);
  }
  return `${url.origin}${url.pathname.replace(/\/+$/, '')}`;
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
