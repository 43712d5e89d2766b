/**
 * The fan-out never skips: when it gets a partition back after the broker
 * has deleted offsets it had not dispatched (its position is below the
 * partition's low watermark), it reads them from MongoDB and releases them to
 * its waiters in order.
 */
import { expect } from 'chai';
import { Kafka, logLevel } from 'kafkajs';
import { decodeCursor } from '#shared/cursor.js';
import { baseTestEnv } from '#test-support/env.js';
import { createAccount, type TestAccount } from './support/accounts.js';
import { call, startTestApi } from './support/api.js';
import { eventually, ingest } from './support/events.js';

describe('fan-out: offsets the broker no longer has', function () {
  this.timeout(90_000);

  it('are read from MongoDB and released to the waiting readers, in order, when the partition comes back', async () => {
    const env = baseTestEnv();
    const topic = `${env.EVENTS_TOPIC}-lowwm`;
    const api = await startTestApi({ INSTANCE_ID: 'test-lowwm', EVENTS_TOPIC: topic, MONGO_DB: `${env.MONGO_DB}_lowwm` });
    const kafka = new Kafka({ clientId: 'zzz-intruder', brokers: env.KAFKA_BROKERS!.split(','), logLevel: logLevel.NOTHING });
    // Another member joins the fan-out's group and takes partitions away from it while events are written.
    const intruder = kafka.consumer({ groupId: api.deps.events.fanout.groupId, sessionTimeout: 10_000, heartbeatInterval: 1000, rebalanceTimeout: 15_000, maxWaitTimeInMs: 100 });
    let held: number[] = [];
    intruder.on(intruder.events.GROUP_JOIN, ({ payload }) => (held = payload.memberAssignment[topic] ?? []));
    const admin = kafka.admin();
    await admin.connect();
    let joined = false;
    try {
      await intruder.connect();
      joined = true;
      await intruder.subscribe({ topic });
      await intruder.run({ autoCommit: false, eachBatch: async () => undefined });
      const partitions = await eventually(async () => (held.length > 0 ? held : undefined), 30_000);
      let acct: TestAccount;
      do acct = await createAccount(api.url);
      while (!partitions.includes(api.deps.events.producer.partitionOf(acct.userId)));
      const partition = api.deps.events.producer.partitionOf(acct.userId);

      const before = api.deps.events.registry.size;
      const waiting = call(api.url, 'POST', '/api/v1/events/wait', { headers: { 'x-api-key': acct.apiKey }, body: { timeout_ms: 50_000 } });
      await eventually(async () => (api.deps.events.registry.size > before ? true : undefined));
      const sent = await ingest(api, [1, 2, 3].map((i) => ({ account_id: acct.userId, type: 'message.received', data: { i } })));
      const last = decodeCursor(sent[2]!.cursor).offset;
      expect(await api.deps.events.watermarks.waitFor(partition, last, 30_000), 'stored in MongoDB').to.equal(true);
      // Retention (or an operator) removes them from the broker before the fan-out gets the partition back.
      await admin.fetchTopicMetadata({ topics: [topic] });
      await admin.deleteTopicRecords({ topic, partitions: [{ partition, offset: '-1' }] });
      const low = (await admin.fetchTopicOffsets(topic)).find((o) => o.partition === partition)!;
      expect(BigInt(low.low) > last, 'the events are gone from the broker').to.equal(true);
      expect(api.deps.events.fanout.position(partition) <= decodeCursor(sent[0]!.cursor).offset, 'the fan-out had not dispatched them').to.equal(true);

      await intruder.disconnect();
      joined = false;
      const res = await waiting;
      expect(res.body.event?.id, 'the long-poll waiting for the account').to.equal(sent[0]!.id);
      await eventually(async () => (api.deps.events.fanout.position(partition) >= BigInt(low.high) ? true : undefined), 20_000);
      // A long-poll resuming after the first, on this process, gets the next one (the fan-out's position is past them all).
      const next = await call(api.url, 'POST', '/api/v1/events/wait', { headers: { 'x-api-key': acct.apiKey }, body: { timeout_ms: 5000, since: sent[0]!.cursor } });
      expect(next.body.event?.id).to.equal(sent[1]!.id);
    } finally {
      if (joined) await intruder.disconnect();
      await admin.disconnect();
      await api.close();
    }
  });
});
