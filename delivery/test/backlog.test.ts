/**
 * Large and stuck backlogs, each in a topic and
 * database of its own:
 * - one account with 50 `["*"]` subscriptions turns a batch of events into
 *   tens of thousands of deliveries: the consumer keeps its group membership
 *   (no rebalance) and everything is delivered;
 * - a hung receiver with 1,000 queued events does not hold up healthy
 *   subscriptions of accounts on the same Kafka partition.
 * Sizes: small in `npm test`, full sizes with FAULTS_FULL=1.
 */
import { expect } from 'chai';
import { Partitioners } from 'kafkajs';
import { hang, Receiver } from '#test-support/receiver.js';
import { uniqueName } from '#test-support/env.js';
import type { EventEnvelope } from '#shared/eventlog/types.js';
import { recordFigures } from '../../api/test/faults/support/figures.js';
import { deliveryTestEnv, envelope, newAccountId, startTestDelivery, TestDb, TestLog, waitForGroup } from './support/delivery.js';

const FULL = process.env.FAULTS_FULL === '1';
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Publishes in sends of at most 1,000 messages (one send per call otherwise). */
async function publishAll(log: TestLog, envelopes: EventEnvelope[]): Promise<void> {
  for (let i = 0; i < envelopes.length; i += 1000) await log.publishAtOnce(envelopes.slice(i, i + 1000));
}

/** `count` account ids whose events land on the same partition as `accountId` (the producer's key hashing). */
function accountsOnPartitionOf(accountId: string, count: number, partitions: number): string[] {
  const partitioner = Partitioners.DefaultPartitioner();
  const partitionMetadata = Array.from({ length: partitions }, (_, i) => ({ partitionId: i, leader: 0, replicas: [0], isr: [0], partitionErrorCode: 0 }));
  const partitionOf = (key: string): number => partitioner({ topic: 't', partitionMetadata, message: { key, value: '' } });
  const target = partitionOf(accountId);
  const out: string[] = [];
  while (out.length < count) {
    const candidate = newAccountId();
    if (partitionOf(candidate) === target) out.push(candidate);
  }
  return out;
}

describe('delivery backlogs', function () {
  let receiver: Receiver;
  before(async () => {
    receiver = await Receiver.start();
  });
  after(() => receiver.close());

  it('schedules a batch of 50 ["*"] subscriptions x many events without leaving its group; everything is delivered', async function () {
    const SUBS = 50;
    const EVENTS = Number(process.env.BIG_BATCH_EVENTS ?? (FULL ? 5000 : 60));
    const total = SUBS * EVENTS;
    this.timeout(120_000 + total * 60);
    const base = deliveryTestEnv(receiver.caFile);
    const env = deliveryTestEnv(receiver.caFile, {
      EVENTS_TOPIC: `${base.EVENTS_TOPIC}-${uniqueName('big')}`,
      MONGO_DB: `${base.MONGO_DB}_big`,
      // Everything here goes through the consumer: a long lease spares re-claims of deliveries
      // waiting their turn, a slow poll spares the test server a scan of the deliveries every 200 ms.
      WEBHOOK_LEASE_MS: '600000',
      WEBHOOK_POLL_INTERVAL_MS: '5000',
      // The receiver runs in this process, and 50 subscriptions each get connections of their own:
      // at 256 attempts in flight both ends of as many TLS handshakes share one thread, and on a
      // loaded machine some took over 4 s (timeouts given up after 1s,1s,1s). 32 in flight keep
      // that thread's work per attempt small; what is tested is the scheduling, not the throughput.
      WEBHOOK_CONCURRENCY: '32',
    });
    const worker = await startTestDelivery(env);
    await waitForGroup(env);
    let joins = 0;
    // A watchdog replacement would be a new member (a rejoin by another name): counted as one.
    const member = worker.consumer.consumer!;
    member.on(member.events.GROUP_JOIN, () => joins++);
    const replacedBefore = worker.consumer.replaced;
    const db = new TestDb(env);
    const log = new TestLog(env);
    const account = newAccountId();
    const paths = Array.from({ length: SUBS }, (_, i) => `/big-${i}`);
    // At once: each waits until its subscription is active (a second, as the API's create).
    await Promise.all(paths.map((path) => db.subscribe(account, receiver.url(path), ['*'])));
    const started = Date.now();
    await publishAll(log, Array.from({ length: EVENTS }, (_, n) => envelope(account, 'message.received', { n })));
    const distinct = (): number => new Set(receiver.received().filter((r) => r.path.startsWith('/big-')).map((r) => r.headers['x-service-delivery'])).size;
    const progress = setInterval(() => console.log(`      ${distinct()}/${total} deliveries, ${joins} rejoins (dispatcher: ${worker.dispatcher.load} held, ${worker.dispatcher.inFlight} sending)`), 30_000);
    try {
      // 60 ms a delivery: npm test runs this beside three other lanes on 2 cores.
      await db.until(async () => distinct() >= total, total * 60, `all ${total} deliveries`);
    } finally {
      clearInterval(progress);
    }
    const requests = receiver.received().filter((r) => r.path.startsWith('/big-')).length;
    const figures = { subscriptions: SUBS, events: EVENTS, deliveries: total, requests, duplicates: requests - total, rejoins: joins, seconds: (Date.now() - started) / 1000 };
    recordFigures('delivery-big-batch', figures);
    expect(joins + worker.consumer.replaced - replacedBefore, 'group rejoins while scheduling (an evicted member)').to.equal(0);
    for (const path of paths) expect(new Set(receiver.received(path).map((r) => r.body.id)).size, path).to.equal(EVENTS);
  });

  it('a hung receiver with 1,000 queued events does not hold up 20 healthy subscriptions on the same partition', async function () {
    this.timeout(240_000);
    const HEALTHY = 20;
    const PER_HEALTHY = FULL ? 200 : 100;
    const base = deliveryTestEnv(receiver.caFile);
    // Few slots, so that one hung subscription's waiting work could exceed them (as 20% hanging
    // subscriptions do with the default 256): what is queued for it must not throttle the rest.
    const env = deliveryTestEnv(receiver.caFile, {
      EVENTS_TOPIC: `${base.EVENTS_TOPIC}-${uniqueName('hung')}`,
      MONGO_DB: `${base.MONGO_DB}_hung`,
      WEBHOOK_CONCURRENCY: '64',
      WEBHOOK_CONCURRENCY_PER_SUBSCRIPTION: '16',
    });
    const worker = await startTestDelivery(env);
    await waitForGroup(env);
    const db = new TestDb(env);
    const log = new TestLog(env);
    const hungAccount = newAccountId();
    receiver.on('/hung', hang);
    await db.subscribe(hungAccount, receiver.url('/hung'), ['*']);

    /** Publishes PER_HEALTHY events to each of 20 fresh healthy subscriptions on the hung account's partition; resolves with the round's figures once all arrived. */
    const round = async (name: string): Promise<{ seconds: number; maxLatencyMs: number; p50LatencyMs: number | undefined }> => {
      const accounts = accountsOnPartitionOf(hungAccount, HEALTHY, Number(env.EVENTS_PARTITIONS));
      const paths = accounts.map((_, i) => `/healthy-${name}-${i}`);
      await Promise.all(accounts.map((account, i) => db.subscribe(account, receiver.url(paths[i]!), ['*'])));
      const events = accounts.flatMap((account) => Array.from({ length: PER_HEALTHY }, (_, n) => envelope(account, 'message.sent', { n })));
      const sent = Date.now();
      await publishAll(log, events);
      const got = (): number => paths.reduce((n, p) => n + new Set(receiver.received(p).map((r) => r.body.id)).size, 0);
      const debug = setInterval(async () => {
        const c = db.collection('deliveries');
        const states = await Promise.all([c.countDocuments({ state: 'pending' }), c.countDocuments({ state: 'pending', lease_owner: null }), c.countDocuments({ state: 'succeeded' }), c.countDocuments({})]).catch((e: Error) => e.message);
        console.log(`      [${name}] ${got()} of ${events.length} arrived; dispatcher ${worker.dispatcher.load} held, ${worker.dispatcher.inFlight} sending; deliveries pending, pending unleased, succeeded, all: ${JSON.stringify(states)}`);
      }, 10_000);
      try {
        await db.until(async () => got() >= events.length, 120_000, `${name}: all ${events.length} healthy deliveries`);
      } finally {
        clearInterval(debug);
      }
      const seconds = (Date.now() - sent) / 1000;
      const latencies = paths.flatMap((p) => receiver.received(p).map((r) => r.at - sent));
      return { seconds, maxLatencyMs: Math.max(...latencies), p50LatencyMs: latencies.sort((a, b) => a - b)[Math.floor(latencies.length / 2)] };
    };

    const alone = await round('alone');
    await publishAll(log, Array.from({ length: 1000 }, (_, n) => envelope(hungAccount, 'call.started', { n })));
    await receiver.waitFor('/hung', 1, 20_000);
    await sleep(1000);
    const withHung = await round('with-hung');
    const ratio = alone.seconds / withHung.seconds;
    const figures = { healthy_subscriptions: HEALTHY, deliveries_per_round: HEALTHY * PER_HEALTHY, alone, with_hung: withHung, throughput_ratio: Number(ratio.toFixed(2)), hung_requests: receiver.received('/hung').length };
    recordFigures('delivery-hung-same-partition', figures);
    // "Within seconds": no healthy delivery much later than the slowest one without the hung receiver. The
    // margin is wide (a loaded machine, other tests alongside); the defect this guards against held healthy
    // deliveries for minutes (90 had not arrived after 120 s), and the ratio itself is the benchmark's figure.
    // The throughput ratio is recorded, not asserted: a speed figure belongs to the benchmark (scenario 5b), and
    // with the rounds now ~2 s long the ratio swings with the load of the tests running alongside (0.73-1.19).
    expect(withHung.maxLatencyMs, 'slowest healthy delivery with the hung receiver (ms)').to.be.at.most(alone.maxLatencyMs * 2 + 5000);
  });
});
