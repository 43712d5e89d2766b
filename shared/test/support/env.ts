/**
 * The environment every test builds its config from. scripts/test.mjs brings
 * the real Kafka and MongoDB-wire server up and exports their addresses; each
 * run gets its own topic and database so runs never see each other's data.
 */
import { randomBytes } from 'node:crypto';

const runId = process.env.TEST_RUN_ID ?? randomBytes(4).toString('hex');

export const TEST_RUN_ID = runId;

export function baseTestEnv(overrides: Record<string, string> = {}): Record<string, string> {
  const kafka = process.env.KAFKA_BROKERS;
  const mongo = process.env.MONGO_URL;
  if (!kafka || !mongo) {
    throw new Error('KAFKA_BROKERS and MONGO_URL must be set: run the tests with `npm test`, which starts the services');
  }
  const env = {
    NODE_ENV: 'test',
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
