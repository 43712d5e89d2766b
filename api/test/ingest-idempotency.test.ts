import { expect } from 'chai';
import { MongoClient } from 'mongodb';
import { atFileEnd } from '#test-support/cleanup.js';
import { buildEnvelope, encodeEnvelope } from '#shared/eventlog/envelope.js';
import { createKafka, createProducer, endOffsets, partitionForKey } from '#shared/eventlog/kafka.js';
import { createLogger } from '#shared/log.js';
import { baseTestEnv, uniqueName } from '#test-support/env.js';
import { KafkaReplyDropper } from '#test-support/kafka-proxy.js';
import { DEV_INGEST_TOKEN } from '../src/config.js';
import { createDeps } from '../src/deps.js';
import { bodyHash, keyId, startKeySweeper } from '../src/features/ingest/idempotency.js';
import { startApi } from '../src/server.js';
import { pollAll, tally } from './faults/support/cluster.js';
import { call, sharedApis, testApiConfig } from './support/api.js';
import { createAccount, type TestAccount } from './support/accounts.js';
import { eventually } from './support/events.js';

const auth = { authorization: `Bearer ${DEV_INGEST_TOKEN}` };

function post(base: string, events: unknown[], key?: string) {
  return call(base, 'POST', '/internal/v1/events', { headers: key === undefined ? auth : { ...auth, 'idempotency-key': key }, body: { events } });
}

/** Every event of the account once all `expected` ids are readable (and whatever else is there). */
async function readAll(base: string, account: TestAccount, expected: string[]) {
  return eventually(async () => {
    const all = await pollAll(base, account.apiKey);
    const ids = new Set(all.map((e) => e.id));
    return expected.every((id) => ids.has(id)) ? all : undefined;
  }, 60_000, 250);
}

/** Ingest idempotency. */
describe('ingest idempotency keys', function () {
  this.timeout(120_000);

  it('answers a retry with the same Idempotency-Key with the first ids and cursors, on any pod, and writes nothing', async () => {
    const [a, b] = await sharedApis();
    const account = await createAccount(a.url);
    const events = [1, 2, 3].map((n) => ({ account_id: account.userId, type: 'message.received', data: { n } }));
    const key = uniqueName('retry');
    const first = await post(a.url, events, key);
    expect(first.status).to.equal(202);
    expect(first.headers.get('idempotent-replayed')).to.equal(null);
    const again = await post(b.url, events, key);
    expect(again.status).to.equal(202);
    expect(again.body).to.deep.equal(first.body);
    expect(again.headers.get('idempotent-replayed')).to.equal('true');
    // A later event proves the reads are past any retry's writes.
    const after = await post(a.url, [{ account_id: account.userId, type: 'message.sent', data: {} }]);
    const all = await readAll(a.url, account, [...first.body.events, ...after.body.events].map((e: { id: string }) => e.id));
    expect(all.map((e) => e.id)).to.deep.equal([...first.body.events, ...after.body.events].map((e: { id: string }) => e.id));
  });

  it('lets one of several concurrent requests with the same key on two pods write; the others get 409 or the same answer', async () => {
    const [a, b] = await sharedApis();
    const account = await createAccount(a.url);
    const events = [1, 2, 3, 4].map((n) => ({ account_id: account.userId, type: 'call.completed', data: { n } }));
    const key = uniqueName('race');
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => post(i % 2 ? b.url : a.url, events, key)));
    const accepted = answers.filter((r) => r.status === 202);
    expect(answers.filter((r) => r.status !== 202 && r.status !== 409).map((r) => r.status)).to.deep.equal([]);
    expect(accepted.length).to.be.at.least(1);
    for (const r of accepted) expect(r.body).to.deep.equal(accepted[0]!.body);
    const settled = await post(b.url, events, key);
    expect(settled.status).to.equal(202);
    expect(settled.body).to.deep.equal(accepted[0]!.body);
    const ids = settled.body.events.map((e: { id: string }) => e.id);
    const after = await post(a.url, [{ account_id: account.userId, type: 'message.sent', data: {} }]);
    const all = await readAll(a.url, account, [...ids, after.body.events[0].id]);
    expect(all.map((e) => e.id)).to.deep.equal([...ids, after.body.events[0].id]);
    console.log(`      8 concurrent requests with one key: ${accepted.length} × 202 (one answer), ${answers.length - accepted.length} × 409; ${ids.length} events stored once`);
  });

  it('refuses a key reused with another body (409) and tells which key', async () => {
    const [a] = await sharedApis();
    const key = uniqueName('reused');
    const events = [{ account_id: 'usr_reuse', type: 'call.started', data: { n: 1 } }];
    expect((await post(a.url, events, key)).status).to.equal(202);
    const other = await post(a.url, [{ ...events[0], data: { n: 2 } }], key);
    expect(other.status).to.equal(409);
    expect(other.body.error.code).to.equal('conflict');
    expect(other.body.error.message).to.match(/different request body/);
    expect(other.body.error.details).to.deep.equal([{ path: 'Idempotency-Key', message: 'already used with a different body (keys are kept 24 hours)' }]);
    const bad = await post(a.url, events, 'has space');
    expect(bad.status).to.equal(400);
  });

  it('keys single events with idempotency_key: a retried batch writes only the events without a stored key', async () => {
    const [a, b] = await sharedApis();
    const account = await createAccount(a.url);
    const keyed = { account_id: account.userId, type: 'call.started', data: { n: 1 }, idempotency_key: uniqueName('evt') };
    const plain = { account_id: account.userId, type: 'call.ended', data: { n: 2 } };
    const first = await post(a.url, [keyed, plain]);
    const second = await post(b.url, [keyed, plain]);
    expect(first.status).to.equal(202);
    expect(second.status).to.equal(202);
    expect(second.body.events[0]).to.deep.equal(first.body.events[0]);
    expect(second.body.events[1].id).to.not.equal(first.body.events[1].id);
    const all = await readAll(a.url, account, [...first.body.events, ...second.body.events].map((e: { id: string }) => e.id));
    expect(all.map((e) => e.id)).to.deep.equal([first.body.events[0].id, first.body.events[1].id, second.body.events[1].id]);
    expect(all[0]).to.not.have.property('idempotency_key');
    const changed = await post(a.url, [{ ...keyed, data: { n: 9 } }]);
    expect(changed.status).to.equal(409);
    expect(changed.body.error.details[0].path).to.equal('events[0].idempotency_key');
    const twice = await post(a.url, [keyed, keyed]);
    expect(twice.status).to.equal(400);
  });

  it('answers 409 while another attempt holds the key, and takes over (same ids) once a dead attempt’s lease has expired', async () => {
    const [a] = await sharedApis();
    const account = await createAccount(a.url);
    const events = [{ account_id: account.userId, type: 'message.received', data: { crash: true } }];
    const key = uniqueName('dead');
    // An attempt on another pod reserved the key, produced its event, and died before storing the outcome.
    const reservedId = buildEnvelope({ ...events[0]!, type: 'message.received' }, new Date()).id;
    const createdAt = new Date().toISOString();
    const client = new MongoClient(process.env.MONGO_URL!);
    try {
      const keys = client.db(a.deps.config.mongo.dbName).collection('ingest_keys');
      await keys.insertOne({
        _id: keyId('request', DEV_INGEST_TOKEN, key) as never,
        kind: 'request',
        body_hash: bodyHash(events),
        state: 'pending',
        attempt: 'dead-attempt',
        lease_until: new Date(Date.now() + 60_000),
        ids: [reservedId],
        created_at: [createdAt],
        cursors: null,
        expires_at: new Date(Date.now() + 86_400_000),
      });
      const producer = createProducer(createKafka(a.deps.config, createLogger('test', 'silent')));
      await producer.connect();
      const envelope = { ...buildEnvelope({ ...events[0]!, type: 'message.received' }, new Date(createdAt)), id: reservedId };
      await producer.send({ topic: a.deps.config.kafka.eventsTopic, acks: -1, messages: [{ partition: partitionForKey(account.userId, a.deps.config.kafka.eventsPartitions), key: account.userId, value: encodeEnvelope(envelope) }] });
      await producer.disconnect();

      const busy = await post(a.url, events, key);
      expect(busy.status).to.equal(409);
      expect(busy.body.error.message).to.match(/still being processed/);
      expect(Number(busy.headers.get('retry-after'))).to.be.greaterThan(0);

      await keys.updateOne({ _id: keyId('request', DEV_INGEST_TOKEN, key) as never }, { $set: { lease_until: new Date(Date.now() - 1) } });
      const retried = await post(a.url, events, key);
      expect(retried.status).to.equal(202);
      expect(retried.body.events.map((e: { id: string }) => e.id)).to.deep.equal([reservedId]);
      const again = await post(a.url, events, key);
      expect(again.headers.get('idempotent-replayed')).to.equal('true');
      expect(again.body).to.deep.equal(retried.body);
      const all = await readAll(a.url, account, [reservedId]);
      expect(all.map((e) => e.id)).to.deep.equal([reservedId]); // on the topic twice, stored once
    } finally {
      await client.close();
    }
  });

  it('sweeps keys past their 24 h (FerretDB has no TTL index)', async () => {
    const client = new MongoClient(process.env.MONGO_URL!);
    try {
      const keys = client.db(`${baseTestEnv().MONGO_DB}_sweep`).collection('ingest_keys');
      const doc = (id: string, expires: number) => ({ _id: id as never, kind: 'request', body_hash: 'x', state: 'done', attempt: 'a', lease_until: new Date(), ids: [], created_at: [], cursors: [], expires_at: new Date(Date.now() + expires) });
      await keys.insertMany([doc('old', -1000), doc('fresh', 86_400_000)]);
      const stop = startKeySweeper(keys as never, { warn: () => undefined }, 100);
      await eventually(async () => ((await keys.countDocuments({ _id: 'old' as never })) === 0 ? true : undefined), 10_000, 50);
      await stop();
      expect(await keys.countDocuments({ _id: 'fresh' as never })).to.equal(1);
    } finally {
      await client.close();
    }
  });

  it('counts every event of a batch that failed part-way exactly once after a retry with the same key', async () => {
    const env = baseTestEnv();
    const config = testApiConfig({ EVENTS_TOPIC: uniqueName(`${env.EVENTS_TOPIC}-partway`), MONGO_DB: `${env.MONGO_DB}_partway`, INGEST_MAX_BATCH: '2000', PRODUCE_TIMEOUT_MS: '3000' });
    const proxy = await KafkaReplyDropper.start(config.kafka.brokers[0]!);
    atFileEnd(() => proxy.close());
    const log = createLogger('test', 'silent');
    const kafka = createKafka(config, log, { socketFactory: proxy.socketFactory, requestTimeout: 1500, retry: { initialRetryTime: 100, retries: 1 } });
    const api = await startApi(config, { deps: createDeps(config, { kafka }) });
    atFileEnd(() => api.close());
    const account = await createAccount(api.url);
    // 1500 events go out in two sends (1000 per send): the first is acknowledged, the second is appended but its reply lost.
    const events = Array.from({ length: 1500 }, (_, i) => ({ account_id: account.userId, type: 'message.received', data: { i } }));
    const key = uniqueName('partway');
    proxy.passThenDrop = 1;
    const failed = await post(api.url, events, key);
    proxy.passThenDrop = null;
    proxy.dropProduceReplies = false;
    expect(failed.status, JSON.stringify(failed.body)).to.equal(503);
    expect(proxy.dropped).to.be.greaterThan(0);

    const retried = await post(api.url, events, key);
    expect(retried.status, JSON.stringify(retried.body)).to.equal(202);
    const acked = retried.body.events.map((e: { id: string }) => e.id);
    const all = await readAll(api.url, account, acked);
    const t = tally(acked, all.map((e) => e.id));
    console.log(`      part-way batch: ${t.expected} acknowledged, ${t.found} found, ${t.duplicated.length} duplicated, ${t.unacknowledged} unacknowledged; ${all.length} events read`);
    expect(t.missing).to.have.length(0);
    expect(t.duplicated).to.have.length(0);
    expect(t.unacknowledged, 'events stored under ids nobody was given').to.equal(0);
    expect(all.map((e) => e.data.i)).to.deep.equal(events.map((e) => e.data.i));
    // The first attempt did append events (now on the topic twice), so the retry was not a clean first write.
    const admin = createKafka(config, log).admin();
    await admin.connect();
    const ends = await endOffsets(admin, config.kafka.eventsTopic);
    await admin.disconnect();
    expect(Number(ends.get(partitionForKey(account.userId, 3))!)).to.be.at.least(2500);
  });
});
