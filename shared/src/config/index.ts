import { type Env, ConfigError, int, oneOf, str } from './env.js';

export { ConfigError, type Env } from './env.js';
export * as read from './env.js';

/** Settings both processes need: where Kafka and MongoDB are, and how to log. */
export interface BaseConfig {
  nodeEnv: 'development' | 'test' | 'production';
  production: boolean;
  /**
   * NODE_ENV=development, set explicitly (`npm start` does): the only mode in
   * which a missing secret falls back to its development default. An unset
   * NODE_ENV means production.
   */
  development: boolean;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  kafka: {
    brokers: string[];
    clientId: string;
    eventsTopic: string;
    /** Fixed when the topic is created: cursors and account placement depend on it. */
    eventsPartitions: number;
    /**
     * EVENT_RETENTION_DAYS (default 30): event history is kept this long (the API
     * sweeps older history), and the topic is created keeping its log a day longer
     * (retention.ms), so nothing history still needs is gone from the log.
     */
    eventsRetentionMs: number;
    /**
     * Copies of each partition, and how many of them must hold a write before
     * the broker acknowledges it (the producer sends acks=all), set when the
     * topic is created; null: the brokers' defaults (default.replication.factor,
     * min.insync.replicas). Production: 3 and 2 (docs/scaling.md).
     */
    eventsReplicationFactor: number | null;
    eventsMinInsyncReplicas: number | null;
  };
  /**
   * slowMs: log commands taking at least this long (0: off).
   * queryShapesDir: test-only (MONGO_QUERY_SHAPES_DIR, set by `npm test`): record the
   * shape of every query sent there, for the query-shape check (mongo/query-shapes.ts).
   */
  mongo: { url: string; dbName: string; slowMs: number; queryShapesDir?: string };
}

export function loadBaseConfig(env: Env, clientId: string): BaseConfig {
  const nodeEnv = oneOf(env, 'NODE_ENV', ['development', 'test', 'production'] as const, 'production');
  const brokers = str(env, 'KAFKA_BROKERS', '127.0.0.1:19092')
    .split(',')
    .map((b) => b.trim())
    .filter(Boolean);
  for (const broker of brokers) {
    if (!/^[^\s:]+:\d{1,5}$/.test(broker)) throw new ConfigError('KAFKA_BROKERS', `has a bad entry "${broker}" (want host:port)`);
  }
  const mongoUrl = str(env, 'MONGO_URL', 'mongodb://127.0.0.1:27027/');
  if (!/^mongodb(\+srv)?:\/\//.test(mongoUrl)) throw new ConfigError('MONGO_URL', 'must start with mongodb:// or mongodb+srv://');
  const topic = str(env, 'EVENTS_TOPIC', 'events');
  if (!/^[A-Za-z0-9._-]{1,200}$/.test(topic)) throw new ConfigError('EVENTS_TOPIC', 'must be a valid Kafka topic name');
  const replicationFactor = int(env, 'EVENTS_REPLICATION_FACTOR', 0, 1, 32) || null;
  const minInsync = int(env, 'EVENTS_MIN_INSYNC_REPLICAS', 0, 1, 32) || null;
  if (replicationFactor !== null && minInsync !== null && minInsync > replicationFactor) {
    throw new ConfigError('EVENTS_MIN_INSYNC_REPLICAS', `must not exceed EVENTS_REPLICATION_FACTOR (${replicationFactor}): no write could ever be acknowledged`);
  }
  const dbName = str(env, 'MONGO_DB', 'event_platform');
  if (!/^[A-Za-z0-9_-]{1,60}$/.test(dbName)) throw new ConfigError('MONGO_DB', 'must be a plain database name');
  return {
    nodeEnv,
    production: nodeEnv === 'production',
    development: nodeEnv === 'development',
    logLevel: oneOf(env, 'LOG_LEVEL', ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const, nodeEnv === 'test' ? 'silent' : 'info'),
    kafka: {
      brokers,
      clientId: str(env, 'KAFKA_CLIENT_ID', clientId),
      eventsTopic: topic,
      eventsPartitions: int(env, 'EVENTS_PARTITIONS', 12, 1, 1000),
      eventsRetentionMs: int(env, 'EVENT_RETENTION_DAYS', 30, 1, 3650) * 24 * 3600 * 1000,
      eventsReplicationFactor: replicationFactor,
      eventsMinInsyncReplicas: minInsync,
    },
    mongo: { url: mongoUrl, dbName, slowMs: int(env, 'MONGO_SLOW_MS', 0, 0, 3_600_000), queryShapesDir: str(env, 'MONGO_QUERY_SHAPES_DIR', '') || undefined },
  };
}
