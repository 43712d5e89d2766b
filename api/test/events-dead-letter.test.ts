import { expect } from 'chai';
import { MongoClient, MongoNetworkError, MongoServerError, MongoServerSelectionError } from 'mongodb';
import { buildEnvelope, encodeEnvelope, toEventDoc } from '#shared/eventlog/envelope.js';
import { createKafka, createProducer, partitionForKey } from '#shared/eventlog/kafka.js';
import { createLogger } from '#shared/log.js';
import { baseTestEnv, uniqueName } from '#test-support/env.js';
import { checkBody, isRefusal } from '../src/event-store/materializer.js';
import { call, startTestApi } from './support/api.js';
import { createAccount } from './support/accounts.js';
import { eventually, ingest } from './support/events.js';

/**
 * An event the store cannot hold (put on the topic without ingest's checks, as
 * a producer of an older version or a bug would) must not stall its partition:
 * it is dead-lettered, readers get a stand-in marked data_unavailable, and
 * the events after it are served. The body is stored only in the account's
 * stream, packed as BSON (event-store/pages.ts), so what decides is whether
 * BSON can encode it, on every store alike; a document FerretDB would refuse
 * field by field (a nested array) is stored and served whole.
 */
describe('a poison event on the log', function () {
  this.timeout(120_000);
  const env = baseTestEnv();
  const topic = uniqueName(`${env.EVENTS_TOPIC}-poison`);
  const db = `${env.MONGO_DB}_poison`;

  it('is dead-lettered after a few refusals; the events after it are pollable and resumable', async () => {
    // No tail window: this test reads what the store holds. (A pod whose window covers a cursor
    // serves such an event as it is on the log, like the live path; docs/guarantees.md.)
    const api = await startTestApi({ EVENTS_TOPIC: topic, MONGO_DB: db, TAIL_WINDOW_BYTES: '0' });
    const account = await createAccount(api.url);
    const accountId = account.userId;
    const [first] = await ingest(api, [{ account_id: accountId, type: 'message.received', data: { n: 1 } }]);

    // Straight onto the topic, past ingest's checks: one FerretDB refuses as a document (nested array; stored packed, it is
    // served whole), one BSON cannot encode (NUL in a key: refused by every MongoDB).
    const kafka = createKafka(api.deps.config, createLogger('test', 'silent'));
    const producer = createProducer(kafka);
    await producer.connect();
    const poison = [
      buildEnvelope({ account_id: accountId, type: 'call.started', data: { matrix: [[1, 2]] } }, new Date()),
      buildEnvelope({ account_id: accountId, type: 'call.ended', data: { 'bad\u0000key': 1 } }, new Date()),
    ];
    await producer.send({
      topic,
      acks: -1,
      messages: poison.map((e) => ({ partition: partitionForKey(accountId, api.deps.config.kafka.eventsPartitions), key: accountId, value: encodeEnvelope(e) })),
    });
    await producer.disconnect();
    const after = await ingest(api, [
      { account_id: accountId, type: 'message.sent', data: { n: 2 } },
      { account_id: accountId, type: 'message.sent', data: { n: 3 } },
    ]);

    // Resuming from the first event's cursor reads MongoDB past the poison: it must be answered, not 503 for ever.
    const found = await eventually(async () => {
      const res = await call(api.url, 'GET', `/api/v1/events?since=${encodeURIComponent(first!.cursor)}&limit=50`, { headers: { authorization: `Bearer ${account.apiKey}` } });
      return res.status === 200 && res.body.events.length === 4 ? res.body.events : undefined;
    }, 60_000, 250);
    expect(found.map((e: { id: string }) => e.id)).to.deep.equal([...poison.map((e) => e.id), ...after.map((e) => e.id)]);
    expect(found[0]).to.include({ id: poison[0]!.id, type: 'call.started' }).and.not.have.property('data_unavailable');
    expect(found[0].data).to.deep.equal({ matrix: [[1, 2]] });
    expect(found[1]).to.include({ id: poison[1]!.id, type: 'call.ended', data_unavailable: true });
    expect(found[1].data).to.deep.equal({});
    expect(found[2]).to.not.have.property('data_unavailable');
    expect(found[3].data).to.deep.equal({ n: 3 });

    const client = new MongoClient(env.MONGO_URL!);
    try {
      const dead = await client.db(db).collection('dead_events').find({}).sort({ offset: 1 }).toArray();
      expect(dead.map((d) => d._id)).to.deep.equal([poison[1]!.id]);
      expect(dead[0]!.error).to.match(/null bytes|BSON/i);
      expect(dead[0]!.failures).to.be.at.least(2);
      // The stand-in's id document says so (a restart finds it: the materializer's storedCopies).
      const standIn = await client.db(db).collection('events').findOne({ _id: poison[1]!.id as never });
      expect(standIn).to.include({ data_unavailable: true });
    } finally {
      await client.close();
    }
    const metrics = await fetch(`${api.url}/metrics`).then((r) => r.text());
    expect(metrics).to.match(/^events_dead_lettered_total\{partition="\d+"\} 1$/m);
    await api.close();
  });
});

describe('materializer failure classes', () => {
  it('refuses a body its stream cannot store as BSON (a NUL byte in a key at any depth, over 16 MB), and takes any other JSON', () => {
    const doc = (data: Record<string, unknown>) => toEventDoc(buildEnvelope({ account_id: 'acct_1', type: 'call.started', data }, new Date()), { partition: 0, offset: 1n });
    const refused = (data: Record<string, unknown>): boolean => {
      try {
        checkBody(doc(data));
        return false;
      } catch (err) {
        expect(isRefusal(err), String(err)).to.equal(true);
        return true;
      }
    };
    expect(refused({ 'bad\u0000key': 1 })).to.equal(true);
    expect(refused({ list: [{ ok: 1 }, { deep: { 'a\u0000': true } }] })).to.equal(true);
    expect(refused({ big: 'x'.repeat(17 * 1024 * 1024) })).to.equal(true);
    expect(refused({ matrix: [[1, 2]], $dollar: 1, 'dotted.key': { 'nul in a value': 'a\u0000b' }, big: 'x'.repeat(1024 * 1024) })).to.equal(false);
  });


  it('tells a refused document from an outage', () => {
    expect(isRefusal(new MongoServerError({ message: 'invalid value (nested arrays are not supported)', code: 2 }))).to.equal(true);
    expect(isRefusal(new MongoServerError({ message: 'duplicate key', code: 11000 }))).to.equal(false);
    expect(isRefusal(new MongoServerError({ message: 'not primary', code: 10107 }))).to.equal(false);
    expect(isRefusal(new MongoServerError({ message: 'database is locked', code: 1 }))).to.equal(false);
    expect(isRefusal(new MongoNetworkError('connection reset'))).to.equal(false);
    expect(isRefusal(new MongoServerSelectionError('no server', { type: 'Unknown', servers: new Map(), stale: false, compatible: true, heartbeatFrequencyMS: 1, localThresholdMS: 1, setName: null, maxElectionId: null, maxSetVersion: null, commonWireVersion: 0, logicalSessionTimeoutMinutes: null } as never))).to.equal(false);
    expect(isRefusal(new Error('socket hang up'))).to.equal(false);
  });
});
