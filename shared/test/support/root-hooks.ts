import { Kafka, logLevel } from 'kafkajs';
import { MongoClient } from 'mongodb';
import { runCleanups } from './cleanup.js';
import { baseTestEnv } from './env.js';

/** Drops this run's topic and database once every test is done. */
async function dropRunData(): Promise<void> {
  if (!process.env.KAFKA_BROKERS || !process.env.MONGO_URL) return;
  const env = baseTestEnv();
  const kafka = new Kafka({ brokers: env.KAFKA_BROKERS!.split(','), logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  try {
    await admin.connect();
    const topics = (await admin.listTopics()).filter((t) => t.startsWith(env.EVENTS_TOPIC!));
    if (topics.length > 0) await admin.deleteTopics({ topics });
  } catch {
    // Best effort: a leftover test topic is harmless.
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
  const client = new MongoClient(env.MONGO_URL!, { serverSelectionTimeoutMS: 3000 });
  try {
    const admin = client.db().admin();
    const { databases } = await admin.listDatabases({ nameOnly: true });
    for (const { name } of databases) {
      if (name.startsWith(env.MONGO_DB!)) await client.db(name).dropDatabase();
    }
  } catch {
    // Best effort.
  } finally {
    await client.close();
  }
}

export const mochaHooks = {
  async afterAll(this: Mocha.Context): Promise<void> {
    this.timeout(120_000);
    await runCleanups();
    if (process.env.KEEP_TEST_DATA !== '1') await dropRunData();
  },
};
