import { expect } from 'chai';
import { loadBaseConfig } from '../src/config/index.js';
import type { Position } from '../src/cursor.js';
import { buildEnvelope, decodeEnvelope } from '../src/eventlog/envelope.js';
import { EventLog } from '../src/eventlog/event-log.js';
import { createConsumer, createKafka, topicCatalog } from '../src/eventlog/kafka.js';
import { createLogger } from '../src/log.js';
import { baseTestEnv, uniqueName } from './support/env.js';
import { KafkaReplyDropper } from './support/kafka-proxy.js';

/**
 * An event log on a fresh one-partition topic whose Kafka client goes through a proxy that can
 * swallow Produce replies; the topic is deleted after the suite. `requestTimeout` and `produceTimeoutMs`
 * set how long a send with a lost reply lasts.
 */
function proxiedEventLog(label: string, opts: { requestTimeout: number; produceTimeoutMs: number }) {
  const config = loadBaseConfig(baseTestEnv({ EVENTS_TOPIC: uniqueName(`${baseTestEnv().EVENTS_TOPIC}-${label}`), EVENTS_PARTITIONS: '1' }), `${label}-test`);
  const log = createLogger('test', 'silent');
  const ctx = { config, log, proxy: null as unknown as KafkaReplyDropper, eventLog: null as unknown as EventLog };

  before(async () => {
    ctx.proxy = await KafkaReplyDropper.start(config.kafka.brokers[0]!);
    const kafka = createKafka(config, log, { socketFactory: ctx.proxy.socketFactory, requestTimeout: opts.requestTimeout, retry: { initialRetryTime: 100, retries: 1 } });
    ctx.eventLog = new EventLog(kafka, topicCatalog(config).events, log, { lingerMs: 0, maxBatchMessages: 1000, maxBatchBytes: 900 * 1024, produceTimeoutMs: opts.produceTimeoutMs });
    await ctx.eventLog.start();
  });

  after(async () => {
    await ctx.eventLog?.stop().catch(() => undefined);
    await ctx.proxy?.close();
    const admin = createKafka(config, log).admin();
    await admin.connect();
    await admin.deleteTopics({ topics: [config.kafka.eventsTopic] }).catch(() => undefined);
    await admin.disconnect();
  });

  return ctx;
}

/**
 * The broker appends a batch, its reply is lost, and every retry's reply is
 * lost too: the send fails. The events after it must still be written under
 * the positions the producer acknowledges.
 */
describe('event log after a send whose reply was lost', function () {
  this.timeout(120_000);
  // Short request timeout and one retry: the lost-reply send fails in seconds, not minutes.
  const ctx = proxiedEventLog('lostreply', { requestTimeout: 1500, produceTimeoutMs: 60_000 });
  const { config, log } = ctx;

  const batch = (n: number, label: string) => Array.from({ length: n }, (_, i) => buildEnvelope({ account_id: 'usr_lost_reply', type: 'call.started', data: { label, i } }, new Date()));

  /** Every event on the topic by offset, read by a consumer that does not go through the ctx.proxy. */
  async function readTopic(expected: number): Promise<Map<bigint, string>> {
    const consumer = createConsumer(createKafka(config, log), uniqueName('lost-reply-reader'));
    const byOffset = new Map<bigint, string>();
    await consumer.connect();
    await consumer.subscribe({ topic: config.kafka.eventsTopic, fromBeginning: true });
    await consumer.run({
      eachMessage: async ({ message }) => {
        byOffset.set(BigInt(message.offset), decodeEnvelope(message.value)!.id);
      },
    });
    const deadline = Date.now() + 30_000;
    while (byOffset.size < expected && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    await consumer.disconnect();
    return byOffset;
  }

  const acked: { id: string; position: Position }[] = [];
  let onTopicCount = 0;

  for (const nextSize of [3, 5]) {
    it(`stores the next batches (the first of them ${nextSize === 3 ? 'of the lost one\'s size' : 'of another size'}) under the positions it acknowledged`, async () => {
      const replacedBefore = ctx.eventLog.replaced;
      const first = batch(3, 'before');
      (await ctx.eventLog.publish(first)).forEach((position, i) => acked.push({ id: first[i]!.id, position }));

      // The broker appends this batch (and takes each retry as a duplicate); no reply arrives.
      ctx.proxy.dropProduceReplies = true;
      const lost = batch(3, 'lost');
      const failure = await ctx.eventLog.publish(lost).then(
        () => null,
        (err: unknown) => err,
      );
      ctx.proxy.dropProduceReplies = false;
      expect(failure, 'the send whose replies were all lost is refused').to.be.instanceOf(Error);
      expect(ctx.proxy.dropped).to.be.greaterThan(0);

      const next = batch(nextSize, 'next');
      (await ctx.eventLog.publish(next)).forEach((position, i) => acked.push({ id: next[i]!.id, position }));
      const otherSize = batch(nextSize === 3 ? 5 : 3, 'other size');
      (await ctx.eventLog.publish(otherSize)).forEach((position, i) => acked.push({ id: otherSize[i]!.id, position }));
      const later = batch(4, 'later');
      (await ctx.eventLog.publish(later)).forEach((position, i) => acked.push({ id: later[i]!.id, position }));

      // 3 + 3 (the lost batch, appended once) + 3 + 5 + 4 records.
      onTopicCount += 18;
      const onTopic = await readTopic(onTopicCount);
      const wrong = acked.filter(({ id, position }) => onTopic.get(position.offset) !== id);
      expect(wrong.map((w) => `${w.id}@${w.position.offset} holds ${onTopic.get(w.position.offset)}`), 'acknowledged events not at their positions').to.deep.equal([]);
      expect(new Set(acked.map((a) => a.position.offset)).size).to.equal(acked.length);
      expect(ctx.eventLog.replaced).to.be.greaterThan(replacedBefore);
    });
  }
});

describe('event log after a produce timeout with the send still under way', function () {
  this.timeout(120_000);
  // kafkajs would wait 30 s for the reply and then retry: the stuck send outlives the produce timeout by far.
  const ctx = proxiedEventLog('timeout', { requestTimeout: 30_000, produceTimeoutMs: 1500 });
  const { config, log } = ctx;

  const batch = (n: number, label: string) => Array.from({ length: n }, (_, i) => buildEnvelope({ account_id: 'usr_timeout', type: 'call.started', data: { label, i } }, new Date()));

  it('refuses the timed-out publish (503), and the next publishes do not wait behind the stuck send and land where acknowledged', async () => {
    await ctx.eventLog.publish(batch(2, 'before'));
    ctx.proxy.dropProduceReplies = true;
    const refused = await ctx.eventLog.publish(batch(3, 'stuck')).then(
      () => null,
      (err: unknown) => err as { status?: number },
    );
    ctx.proxy.dropProduceReplies = false;
    expect(refused?.status, 'the publish that timed out').to.equal(503);

    const acked: { id: string; position: Position }[] = [];
    for (const size of [3, 4]) {
      const next = batch(size, `after ${size}`);
      (await ctx.eventLog.publish(next)).forEach((position, i) => acked.push({ id: next[i]!.id, position }));
    }
    const consumer = createConsumer(createKafka(config, log), uniqueName('timeout-reader'));
    const byOffset = new Map<bigint, string>();
    await consumer.connect();
    await consumer.subscribe({ topic: config.kafka.eventsTopic, fromBeginning: true });
    await consumer.run({ eachMessage: async ({ message }) => void byOffset.set(BigInt(message.offset), decodeEnvelope(message.value)!.id) });
    const last = acked.at(-1)!.position.offset;
    const deadline = Date.now() + 30_000;
    while (!byOffset.has(last) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    await consumer.disconnect();
    expect(acked.filter(({ id, position }) => byOffset.get(position.offset) !== id).map((a) => a.id), 'acknowledged events not at their positions').to.deep.equal([]);
  });
});
