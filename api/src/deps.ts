import { createKafka, type Kafka } from '#shared/eventlog/kafka.js';
import { Lifecycle } from '#shared/lifecycle.js';
import { createLogger, type Logger } from '#shared/log.js';
import { createMongo, type Mongo } from '#shared/mongo/index.js';
import { DueWriteOrder } from '#shared/mongo/delivery-queue.js';
import { SecretBox } from '#shared/secrets.js';
import { DnsResolver } from '#shared/dns.js';
import type { Resolver } from '#shared/url-safety.js';
import type { ApiConfig } from './config.js';
import { PasswordHasher, SCRYPT_PARAMS, UserReads } from './features/auth/index.js';
import { HeldReaders } from './live/held.js';
import { createEventsRuntime, type EventsRuntime, type EventsRuntimeOverrides } from './live/runtime.js';
import { KafkaProbe } from './features/health/index.js';
import { startKeySweeper } from './features/ingest/index.js';
import { createRateLimits, flushRateLimits, startWindowSweeper, type RateLimits } from './features/limits/index.js';
import { startOpKeySweeper } from './features/webhooks/index.js';
import { KeyCache } from './features/keys/index.js';
import { createStreamsRuntime, type StreamsRuntime } from './features/streams/index.js';
import { createApiMetrics, type ApiMetrics } from './metrics.js';
import { registerTailMetrics } from './live/tail-metrics.js';

/**
 * Everything a route or service may use, built once per process (or per test
 * app). Plain object, no container: tests build their own with overrides.
 */
export interface ApiDeps {
  config: ApiConfig;
  log: Logger;
  mongo: Mongo;
  kafka: Kafka;
  kafkaProbe: KafkaProbe;
  lifecycle: Lifecycle;
  clock: () => Date;
  /** Request budgets shared by every API process through MongoDB. */
  limits: RateLimits;
  /** DNS for webhook URL checks: c-ares with a cache and a per-account cap (tests inject a fake). */
  resolveHost: Resolver;
  /** Seals webhook signing secrets at rest. */
  secretBox: SecretBox;
  /** The event log: producer, materializer, fan-out and live waiters. */
  events: EventsRuntime;
  streams: StreamsRuntime;
  /** Prometheus metrics of this process (its own registry). */
  metrics: ApiMetrics;
  /** scrypt with the configured cost, a bounded number of derivations at once. */
  passwords: PasswordHasher;
  /** API keys this process confirmed, kept exact across processes (features/keys/cache.ts). */
  keyCache: KeyCache;
  /** User lookups in flight: concurrent lookups of one user share one read. */
  userReads: UserReads;
  /** This process's write order into the due store (delivery-queue.ts): one for the whole process. */
  dueWrites: DueWriteOrder;
  /** Held long-polls and streams: their deadlines, the per-account long-poll cap, parking (live/held.ts). */
  held: HeldReaders;
}

/** How late past its timeout_ms a long-poll may answer: its deadline is rounded up to this. */
const DEADLINE_RESOLUTION_MS = 25;

/** `kafka`: the client the event log uses (tests route it through a fault-injecting proxy); `events`: consumer test hooks. */
export function createDeps(config: ApiConfig, overrides: { log?: Logger; kafka?: Kafka; events?: EventsRuntimeOverrides } = {}): ApiDeps {
  const log = overrides.log ?? createLogger('api', config.logLevel).child({ instance: config.instanceId });
  const mongo = createMongo(config, { log });
  const kafka = overrides.kafka ?? createKafka(config, log);
  const lifecycle = new Lifecycle(log);
  const kafkaProbe = new KafkaProbe(createKafka(config, log, { retry: { retries: 0 } }));
  lifecycle.onStop('mongo', () => mongo.close());
  lifecycle.onStop('kafka-probe', () => kafkaProbe.close());
  const limits = createRateLimits(config, mongo, log);
  // Stops run in reverse: the pending local admissions are written before MongoDB closes.
  lifecycle.onStop('rate-limit-flush', () => flushRateLimits(limits));
  lifecycle.onStop('rate-limit-sweeper', startWindowSweeper(mongo.collections.rateLimits, log));
  lifecycle.onStop('ingest-key-sweeper', startKeySweeper(mongo.collections.ingestKeys, log));
  lifecycle.onStop('webhook-op-key-sweeper', startOpKeySweeper({ mongo }, log));
  const keyCache = new KeyCache({
    instanceId: config.instanceId,
    epoch: mongo.collections.keyEpoch,
    pods: mongo.collections.apiPods,
    log: log.child({ component: 'key-cache' }),
    ...config.auth.keyCache,
  });
  keyCache.start();
  // Before MongoDB closes (stops run in reverse): this process leaves api_pods.
  lifecycle.onStop('key-cache', () => keyCache.stop());
  const clock = (): Date => new Date();
  const metrics = createApiMetrics();
  const events = createEventsRuntime(config, log, kafka, mongo, metrics.consumerLag, overrides.events, (partition) => metrics.eventsDeadLettered.inc({ partition: String(partition) }));
  metrics.watchMaterializer({
    partitions: () => events.fanout.partitions(),
    endOffset: (p) => maxOf(events.fanout.position(p), metrics.consumerLag.highWatermark(p) ?? 0n),
    refreshWatermark: (p) => events.watermarks.current(p),
    knownWatermark: (p) => events.watermarks.cached(p),
  });
  registerTailMetrics(metrics.registry, events.tail);
  const streams = createStreamsRuntime(config, mongo, clock);
  // c-ares, not dns.lookup: a slow DNS server must not hold the threadpool logins need (shared/src/dns.ts).
  const dns = new DnsResolver(config.webhooks.dns);
  lifecycle.onStop('dns', () => dns.close());
  return {
    config,
    log,
    mongo,
    kafka,
    kafkaProbe,
    lifecycle,
    clock,
    limits,
    events,
    streams,
    resolveHost: dns.resolve,
    secretBox: new SecretBox(config.webhooks.secretKey),
    metrics,
    keyCache,
    userReads: new UserReads(mongo.collections.users),
    dueWrites: new DueWriteOrder(),
    held: new HeldReaders({ deadlineResolutionMs: DEADLINE_RESOLUTION_MS, maxLongPollsPerAccount: config.events.maxLongPollsPerAccount }),
    passwords: new PasswordHasher({ ...SCRYPT_PARAMS, N: config.auth.scryptN }, config.auth.hashConcurrency, config.auth.hashQueue),
  };
}

function maxOf(a: bigint, b: bigint): bigint {
  return a > b ? a : b;
}
