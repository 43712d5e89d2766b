import { Kafka, logLevel } from 'kafkajs';
import { MongoClient } from 'mongodb';
import { runCleanups, runFileCleanups } from './cleanup.js';
import { baseTestEnv, usedDatabases } from './env.js';

/** The run's own topic, or one named after it (`<topic>-tail`); not `<topic>l`, another run's. */
export function isRunTopic(topic: string, runTopic: string): boolean {
  return topic === runTopic || topic.startsWith(`${runTopic}-`);
}

/** Drops this run's topic and database once every test is done. */
async function dropRunData(): Promise<void> {
  if (!process.env.KAFKA_BROKERS || !process.env.MONGO_URL) return;
  const env = baseTestEnv();
  const kafka = new Kafka({ brokers: env.KAFKA_BROKERS!.split(','), logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  try {
    await admin.connect();
    // This run's topic and those named after it (`<topic>-tail`, ...), not another run's whose id
    // merely starts with ours: `npm test` runs its late files as run `<id>l` beside run `<id>`, and a
    // bare prefix match deleted their topics under them when the main run ended first.
    const topics = (await admin.listTopics()).filter((t) => isRunTopic(t, env.EVENTS_TOPIC!));
    if (topics.length > 0) await admin.deleteTopics({ topics });
  } catch {
    // Best effort: a leftover test topic is harmless.
  } finally {
    await admin.disconnect().catch(() => undefined);
  }
  const client = new MongoClient(env.MONGO_URL!, { serverSelectionTimeoutMS: 3000 });
  try {
    // By name: listing databases on a FerretDB holding many of them can take minutes.
    for (const name of usedDatabases) {
      if (name.startsWith(env.MONGO_DB!)) await client.db(name).dropDatabase({ timeoutMS: 15_000 });
    }
  } catch {
    // Best effort: a leftover test database is harmless.
  } finally {
    await client.close();
  }
}

/** Top-level suites (one per file, as files are written here) given their cleanup hook. */
const hooked = new WeakSet<Mocha.Suite>();

export const mochaHooks = {
  /**
   * At a file's first test: its top-level describe closes what the file started (atFileEnd) when it
   * ends, after its own `after` hooks.
   */
  beforeEach(this: Mocha.Context): void {
    let suite = this.currentTest?.parent;
    while (suite?.parent && !suite.parent.root) suite = suite.parent;
    if (!suite || suite.root || hooked.has(suite)) return;
    hooked.add(suite);
    suite.afterAll('close what the file started', async function (this: Mocha.Context) {
      this.timeout(120_000);
      await runFileCleanups();
    });
  },
  async afterAll(this: Mocha.Context): Promise<void> {
    this.timeout(120_000);
    await runCleanups();
    if (process.env.KEEP_TEST_DATA !== '1') await dropRunData();
  },
};
