/**
 * The environment every test builds its config from. scripts/test.mjs brings
 * the real Kafka and MongoDB-wire server up and exports their addresses; each
 * run gets its own topic and database so runs never see each other's data.
 */
import { randomBytes } from 'node:crypto';

const runId = process.env.TEST_RUN_ID ?? randomBytes(4).toString('hex');

export const TEST_RUN_ID = runId;

/**
 * Outside NODE_ENV=development every secret must be set (shared/src/config),
 * so the test environment sets them. INGEST_TOKEN is the development default
 * on purpose: the tests check that scripts/emit.ts, which falls back to it,
 * reaches a development API (the API accepts it only on a loopback HOST).
 */
export const TEST_SECRETS: Readonly<Record<string, string>> = {
  JWT_SECRET: 'test-only-jwt-secret-0123456789abcdef',
  INGEST_TOKEN: 'dev-only-ingest-token-change-me-000',
  // base64 of the 32 ASCII bytes "test-only-webhook-key-0123456789".
  WEBHOOK_SECRET_KEY: Buffer.from('test-only-webhook-key-0123456789').toString('base64'),
};

export function baseTestEnv(overrides: Record<string, string> = {}): Record<string, string> {
  const kafka = process.env.KAFKA_BROKERS;
  const mongo = process.env.MONGO_URL;
  if (!kafka || !mongo) {
    throw new Error('KAFKA_BROKERS and MONGO_URL must be set: run the tests with `npm test`, which starts the services');
  }
  const env = {
    NODE_ENV: 'test',
    ...TEST_SECRETS,
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    KAFKA_BROKERS: kafka,
    MONGO_URL: mongo,
    EVENTS_TOPIC: `events-test-${runId}`,
    EVENTS_PARTITIONS: '3',
    MONGO_DB: `test_${runId}`,
    PORT: '0',
    HOST: '127.0.0.1',
    // No delivery metrics server unless a test asks for one: workers of parallel runs would share 9464.
    METRICS_PORT: '0',
    // The query-shape check (shared/src/mongo/query-shapes.ts): `npm test` names the directory.
    ...(process.env.MONGO_QUERY_SHAPES_DIR ? { MONGO_QUERY_SHAPES_DIR: process.env.MONGO_QUERY_SHAPES_DIR } : {}),
    ...overrides,
  };
  usedDatabases.add(env.MONGO_DB!);
  return env;
}

/** Every database name a test environment was built with, dropped when the run ends. */
export const usedDatabases = new Set<string>();

/** A short unique suffix for names a single test owns (topics, groups, databases, emails). */
export function uniqueName(prefix: string): string {
  return `${prefix}-${randomBytes(5).toString('hex')}`;
}

/** A database a single test owns, named under the run's database so the run's cleanup drops it. */
export function ownDatabase(prefix: string): string {
  return `${baseTestEnv().MONGO_DB}_${uniqueName(prefix).replace('-', '_')}`;
}
