import { expect } from 'chai';
import { MongoClient } from 'mongodb';
import { createKafka, endOffsets } from '#shared/eventlog/kafka.js';
import { fetchTopicId } from '#shared/eventlog/topic-id.js';
import { guardTopic, TopicMismatchError } from '#shared/eventlog/topic-guard.js';
import { createLogger } from '#shared/log.js';
import { baseTestEnv, uniqueName } from '#test-support/env.js';
import { loadDeliveryConfig } from '../../delivery/src/config.js';
import { startDelivery } from '../../delivery/src/worker.js';
import { call, startTestApi } from './support/api.js';
import { createAccount } from './support/accounts.js';
import { eventually, ingest } from './support/events.js';

/**
 * The event topic as the deployment first knew it:
 * its partition count is enforced, and the watermarks belong to one life of
 * the topic (its Kafka topic id).
 */
describe('event topic guard', function () {
  this.timeout(180_000);
  const env = baseTestEnv();
  const log = createLogger('test', 'silent');
  let mongo: MongoClient;

  before(() => {
    mongo = new MongoClient(env.MONGO_URL!);
  });

  after(async () => {
    await mongo.close();
  });

  async function withAdmin<T>(work: (admin: ReturnType<ReturnType<typeof createKafka>['admin']>) => Promise<T>): Promise<T> {
    const admin = createKafka({ kafka: { brokers: env.KAFKA_BROKERS!.split(','), clientId: 'guard-test' } } as never, log).admin();
    await admin.connect();
    try {
      return await work(admin);
    } finally {
      await admin.disconnect();
    }
  }

  it('adopts watermarks written before topic ids were recorded, resets them for another topic id, refuses another count', async () => {
    const db = mongo.db(`${env.MONGO_DB}_${uniqueName('guard').replace(/-/g, '_')}`);
    const stores = { eventTopics: db.collection('event_topics'), watermarks: db.collection('watermarks') } as never;
    const watermarks = db.collection('watermarks');
    const now = new Date();
    // An older version's watermarks: no topic id, no event_topics record.
    await watermarks.insertMany([0, 1].map((p) => ({ _id: `t:${p}` as never, topic: 't', partition: p, offset: 40 + p, updated_at: now })));
    await guardTopic(stores, { topic: 't', partitions: 2, topicId: 'aaaa' }, log);
    expect((await watermarks.find({}).toArray()).map((w) => w.topic_id)).to.deep.equal(['aaaa', 'aaaa']);
    expect(await db.collection('event_topics').findOne({ _id: 't' as never })).to.include({ partitions: 2, topic_id: 'aaaa' });
    await guardTopic(stores, { topic: 't', partitions: 2, topicId: 'aaaa' }, log); // a restart changes nothing
    expect(await watermarks.countDocuments({})).to.equal(2);

    const err = await guardTopic(stores, { topic: 't', partitions: 3, topicId: 'aaaa' }, log).catch((e: unknown) => e);
    expect(err).to.be.instanceOf(TopicMismatchError);

    // Recreated: the old log's watermarks go; one already written for the new log (by a faster process) stays.
    await watermarks.insertOne({ _id: 't:other' as never, topic: 't', partition: 1, offset: 0, topic_id: 'bbbb', updated_at: now });
    await guardTopic(stores, { topic: 't', partitions: 2, topicId: 'bbbb' }, log);
    expect((await watermarks.find({}).toArray()).map((w) => `${w._id}:${w.topic_id}`)).to.deep.equal(['t:other:bbbb']);
    expect(await db.collection('event_topics').findOne({ _id: 't' as never })).to.include({ topic_id: 'bbbb' });
    await db.dropDatabase();
  });

  it('refuses to start an api or a delivery process on a topic whose partition count changed since the first start', async () => {
    const topic = uniqueName(`${env.EVENTS_TOPIC}-grown`);
    const db = `${env.MONGO_DB}_${uniqueName('grown').replace(/-/g, '_')}`;
    const first = await startTestApi({ EVENTS_TOPIC: topic, MONGO_DB: db, EVENTS_PARTITIONS: '3' });
    await first.close();
    const recorded = await mongo.db(db).collection('event_topics').findOne({ _id: topic as never });
    expect(recorded).to.include({ partitions: 3 });

    // An operator adds partitions with Kafka's tools (and sets EVENTS_PARTITIONS to match).
    await withAdmin((admin) => admin.createPartitions({ topicPartitions: [{ topic, count: 4 }] }));
    const refused = await startTestApi({ EVENTS_TOPIC: topic, MONGO_DB: db, EVENTS_PARTITIONS: '4' }).then(
      (api) => api.close().then(() => null),
      (err: unknown) => err as Error,
    );
    expect(refused, 'the api started on a topic with another partition count').to.be.instanceOf(Error);
    expect(refused!.message).to.match(/has 4 partitions, but this deployment recorded 3/);
    expect(refused!.message).to.match(/Changing the partition count/);

    const delivery = await startDelivery(loadDeliveryConfig(baseTestEnv({ EVENTS_TOPIC: topic, MONGO_DB: db, EVENTS_PARTITIONS: '4', DELIVERY_GROUP_ID: uniqueName('guard') }))).then(
      (worker) => worker.close().then(() => null),
      (err: unknown) => err as Error,
    );
    expect(delivery, 'the delivery process started on a topic with another partition count').to.be.instanceOf(Error);
    expect(delivery!.message).to.match(/has 4 partitions, but this deployment recorded 3/);
    await withAdmin((admin) => admin.deleteTopics({ topics: [topic] })).catch(() => undefined);
  });

  it('resets the watermarks of a recreated topic (new Kafka topic id) and never trusts the old log’s offsets', async () => {
    const topic = uniqueName(`${env.EVENTS_TOPIC}-reborn`);
    const db = `${env.MONGO_DB}_${uniqueName('reborn').replace(/-/g, '_')}`;
    const watermarks = () => mongo.db(db).collection('watermarks').find({ topic }).toArray();

    // First life: 30 events for one account, materialized (watermark 29 on its partition).
    const api = await startTestApi({ EVENTS_TOPIC: topic, MONGO_DB: db, EVENTS_PARTITIONS: '3' });
    const account = await createAccount(api.url);
    await ingest(api, Array.from({ length: 30 }, (_, i) => ({ account_id: account.userId, type: 'message.received', data: { life: 1, i } })));
    const oldId = await fetchTopicId(env.KAFKA_BROKERS!.split(','), topic);
    await eventually(async () => ((await watermarks()).some((w) => w.offset === 29) ? true : undefined), 60_000, 200);
    expect((await watermarks()).every((w) => w.topic_id === oldId)).to.equal(true);
    await api.close();

    // The topic is deleted and created again under the same name: its offsets start again at 0.
    await withAdmin(async (admin) => {
      await admin.deleteTopics({ topics: [topic] });
      await eventually(async () => (!(await admin.listTopics()).includes(topic) ? true : undefined), 30_000, 200);
      await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: 3 }] });
    });
    const newId = await fetchTopicId(env.KAFKA_BROKERS!.split(','), topic);
    expect(newId).to.not.equal(oldId);

    const again = await startTestApi({ EVENTS_TOPIC: topic, MONGO_DB: db, EVENTS_PARTITIONS: '3' });
    const stale = (await watermarks()).filter((w) => w.topic_id !== newId);
    expect(stale.map((w) => `${w._id}=${w.offset} (${w.topic_id})`), 'watermarks of the old log still present').to.deep.equal([]);
    expect(await mongo.db(db).collection('event_topics').findOne({ _id: topic as never })).to.include({ topic_id: newId, partitions: 3 });

    // The new log's events are materialized under watermarks of the new topic id, at the new log's offsets.
    const [fresh] = await ingest(again, [{ account_id: account.userId, type: 'message.sent', data: { life: 2 } }]);
    await eventually(async () => ((await watermarks()).some((w) => w.topic_id === newId && w.offset === 0) ? true : undefined), 60_000, 200);
    const ends = await withAdmin((admin) => endOffsets(admin, topic));
    for (const w of await watermarks()) expect(w.offset, `watermark of partition ${w.partition}`).to.be.lessThan(Number(ends.get(w.partition as number)!));
    const res = await call(again.url, 'GET', '/api/v1/events?limit=100', { headers: { authorization: `Bearer ${account.apiKey}` } });
    expect(res.status).to.equal(200);
    expect(res.body.events.map((e: { id: string }) => e.id)).to.include(fresh!.id);
    await again.close();
    await withAdmin((admin) => admin.deleteTopics({ topics: [topic] })).catch(() => undefined);
  });
});
