import { expect } from 'chai';
import { Kafka, logLevel } from 'kafkajs';
import { MongoClient } from 'mongodb';
import { baseTestEnv, uniqueName } from './support/env.js';

describe('real services', () => {
  const env = baseTestEnv();

  it('produces an event to Kafka and reads it back through a consumer group', async function () {
    this.timeout(60_000);
    const kafka = new Kafka({ brokers: env.KAFKA_BROKERS!.split(','), logLevel: logLevel.NOTHING });
    const topic = `${env.EVENTS_TOPIC}-probe-${uniqueName('t')}`;
    const admin = kafka.admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic, numPartitions: 1 }], waitForLeaders: true });
    const producer = kafka.producer({ idempotent: true });
    const consumer = kafka.consumer({ groupId: uniqueName('probe-group') });
    try {
      await producer.connect();
      const value = JSON.stringify({ hello: uniqueName('world') });
      await producer.send({ topic, acks: -1, messages: [{ key: 'acct', value }] });
      await consumer.connect();
      await consumer.subscribe({ topic, fromBeginning: true });
      const received = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('no message within 30 s')), 30_000);
        void consumer.run({
          eachMessage: async ({ message }) => {
            clearTimeout(timer);
            resolve(message.value!.toString());
          },
        });
      });
      expect(received).to.equal(value);
    } finally {
      await consumer.disconnect();
      await producer.disconnect();
      await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
      await admin.disconnect();
    }
  });

  it('writes and reads a document in the MongoDB-wire server', async () => {
    const client = new MongoClient(env.MONGO_URL!, { serverSelectionTimeoutMS: 5000 });
    try {
      const coll = client.db(env.MONGO_DB).collection<{ _id: string; n: number }>('probe');
      const id = uniqueName('doc');
      await coll.insertOne({ _id: id, n: 42 });
      const found = await coll.findOne({ _id: id });
      expect(found).to.deep.equal({ _id: id, n: 42 });
    } finally {
      await client.close();
    }
  });
});

describe('mongo indexes', () => {
  it('can be ensured twice on the same database (a second boot)', async () => {
    const { createMongo, ensureIndexes } = await import('../src/mongo/index.js');
    const { loadBaseConfig } = await import('../src/config/index.js');
    const { createLogger } = await import('../src/log.js');
    const env = baseTestEnv({ MONGO_DB: `${baseTestEnv().MONGO_DB}_idx` });
    const mongo = createMongo(loadBaseConfig(env, 'test'));
    const log = createLogger('test', 'silent');
    try {
      await ensureIndexes(mongo, log);
      await ensureIndexes(mongo, log);
      const names = (await mongo.collections.users.indexes()).map((i) => i.name);
      expect(names).to.include('email_unique');
    } finally {
      await mongo.db.dropDatabase();
      await mongo.close();
    }
  });
});
