/**
 * The retry store's time buckets on the real server: a writer that meets a
 * sealed bucket loses nothing, a retry that fell due while no delivery
 * process ran is sent once one starts, two processes reading the same full
 * bucket send each delivery once, and pending deliveries stored by an earlier
 * version (no bucket entry) are found at the first boot.
 */
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { pino } from 'pino';
import { bucketOf, DUE_BUCKET_MS, DueWriteOrder, dueStoreHooks, insertDeliveries, readBucket, readDueCursor, scheduleDue } from '#shared/mongo/delivery-queue.js';
import { createMongo, ensureIndexes, type DeliveryDoc, type Mongo } from '#shared/mongo/index.js';
import { SecretBox } from '#shared/secrets.js';
import { Receiver } from '#test-support/receiver.js';
import { uniqueName } from '#test-support/env.js';
import { atFileEnd } from '#test-support/cleanup.js';
import { loadDeliveryConfig } from '../src/config.js';
import { Dispatcher } from '../src/dispatch.js';
import { logJob } from '../src/jobs.js';
import { createSender } from '../src/http-sender.js';
import { RetryScheduler } from '../src/retry-scheduler.js';
import { startDelivery } from '../src/worker.js';
import { newDelivery, type AttemptRecord } from '../src/deliveries.js';
import { deliveryTestEnv, envelope, newAccountId, TestDb, TestLog, waitForGroup } from './support/delivery.js';

const silent = pino({ level: 'silent' });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** Until bucket b is wholly in the past (readers only read such buckets). */
const untilOver = (b: number) => sleep(Math.max(0, (b + 1) * DUE_BUCKET_MS - Date.now() + 20));

describe('retry store (due buckets)', function () {
  this.timeout(90_000);
  let receiver: Receiver;
  let env: Record<string, string>;

  before(async () => {
    receiver = await Receiver.start();
    env = deliveryTestEnv(receiver.caFile, { MONGO_DB: `${deliveryTestEnv('x').MONGO_DB}_retrystore` });
  });
  after(() => receiver.close());

  /** A fresh database of its own (so no cursor and no other test's buckets). */
  async function freshStore(tag: string): Promise<{ mongo: Mongo; env: Record<string, string> }> {
    const own = { ...env, MONGO_DB: `${env.MONGO_DB}_${tag}` };
    const mongo = createMongo(loadDeliveryConfig(own));
    atFileEnd(() => mongo.close());
    await ensureIndexes(mongo, silent);
    return { mongo, env: own };
  }

  /** A dispatcher + retry scheduler pair as one delivery process runs them, without Kafka. */
  function deliveryProcess(mongo: Mongo, owner: string): RetryScheduler {
    const cfg = loadDeliveryConfig(env).webhooks;
    const sender = createSender({ policy: { allowPrivate: true }, resolve: async () => ['127.0.0.1'], caPem: readFileSync(receiver.caFile, 'utf8'), timeoutMs: 4000, userAgent: 't' });
    const shared = { log: silent, collections: { ...mongo.collections, dueWrites: new DueWriteOrder() }, owner, leaseMs: cfg.leaseMs, clock: () => new Date() };
    const dispatcher = new Dispatcher({ ...shared, sender, box: new SecretBox(cfg.secretKey), retrySchedule: cfg.retrySchedule }, { concurrency: 16, perSubscription: 8 });
    const scheduler = new RetryScheduler({ ...shared, dispatcher, intervalMs: 50 });
    atFileEnd(async () => {
      await scheduler.stop();
      await dispatcher.stop(5000);
      sender.close();
    });
    return scheduler;
  }

  function pending(id: string, sub: { _id: string; account_id: string }, over: Partial<DeliveryDoc> = {}): DeliveryDoc {
    const now = new Date();
    return {
      _id: id, account_id: sub.account_id, subscription_id: sub._id, event_id: 'evt_' + id, event_type: 'call.started', body: JSON.stringify({ id: 'evt_' + id }),
      state: 'pending', attempts: 1, next_attempt_at: now, claim_seq: 1, lease_owner: null, lease_until: null, last_status: 500, last_outcome: 'http_5xx', created_at: now, updated_at: now, ...over,
    };
  }

  it('a writer whose bucket is sealed under it puts its entries in a later bucket: nothing is lost', async () => {
    const { mongo } = await freshStore('seal');
    const coll = mongo.collections.retryDue;
    /** This test's writer: one process. */
    const q = { retryDue: coll, dueWrites: new DueWriteOrder() };
    const now = Date.now();
    const b = bucketOf(now);
    let reached!: () => void;
    const atInsert = new Promise<void>((r) => (reached = r));
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const tried: number[] = [];
    dueStoreHooks.beforeSlotInsert = async (bucket) => {
      tried.push(bucket);
      if (bucket !== b) return;
      reached();
      await gate;
    };
    try {
      // The writer has picked bucket b and its slot, and stops right before the insert...
      const writing = scheduleDue(q, [{ d: 'dlv_late_writer', s: 'wh_x', t: now }], now);
      await atInsert;
      // ...while bucket b ends and a reader reads it (finding it empty) and seals it.
      await untilOver(b);
      expect(await readBucket(coll, b)).to.deep.equal([]);
      release();
      await writing;
    } finally {
      dueStoreHooks.beforeSlotInsert = undefined;
    }
    const moved = tried[tried.length - 1] as number;
    expect(moved, 'moved to a later bucket').to.be.greaterThan(b);
    // The sealed bucket stays as every reader saw it; the entry is in the later one, once.
    expect(await readBucket(coll, b)).to.deep.equal([]);
    await untilOver(moved);
    const found: string[] = [];
    for (let x = b + 1; x <= moved; x++) found.push(...(await readBucket(coll, x)).map((e) => e.d));
    expect(found).to.deep.equal(['dlv_late_writer']);
  });

  it('a writer never leaves a hole below a slot: two batches into one bucket, the first held up, both found', async () => {
    const { mongo } = await freshStore('hole');
    const coll = mongo.collections.retryDue;
    /** This test's writer: one process. */
    const q = { retryDue: coll, dueWrites: new DueWriteOrder() };
    const now = Date.now();
    const b = bucketOf(now);
    let reached!: () => void;
    const atInsert = new Promise<void>((r) => (reached = r));
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const tried: number[] = [];
    dueStoreHooks.beforeSlotInsert = async (bucket, n) => {
      tried.push(bucket);
      if (bucket !== b || n !== 0) return;
      reached();
      await gate;
    };
    try {
      // The first batch holds slot 0 of bucket b; the second must not land in slot 1 meanwhile,
      // or a reader that finds slot 0 empty would seal the bucket there and never see slot 1.
      const first = scheduleDue(q, [{ d: 'dlv_first', s: 'wh_x', t: now }], now);
      await atInsert;
      const second = scheduleDue(q, [{ d: 'dlv_second', s: 'wh_x', t: now }], now);
      await untilOver(b);
      const sealedWith = (await readBucket(coll, b)).map((e) => e.d);
      release();
      await Promise.all([first, second]);
      const last = Math.max(...tried);
      await untilOver(last);
      const found = [...sealedWith];
      for (let x = b + 1; x <= last; x++) found.push(...(await readBucket(coll, x)).map((e) => e.d));
      expect(found.sort()).to.deep.equal(['dlv_first', 'dlv_second']);
    } finally {
      dueStoreHooks.beforeSlotInsert = undefined;
      release();
    }
  });

  it('two processes reading one bucket of many due retries send each delivery exactly once', async () => {
    const { mongo, env: own } = await freshStore('two');
    const db = new TestDb(own);
    const subs = await Promise.all(['/two-a', '/two-b', '/two-c', '/two-d'].map(async (path) => {
      receiver.on(path, () => ({ status: 200 }));
      return db.subscribe(newAccountId(), receiver.url(path), ['*']);
    }));
    const tag = uniqueName('x');
    const docs = Array.from({ length: 200 }, (_, i) => pending(`dlv_two_${i}_${tag}`, subs[i % 4]!));
    await insertDeliveries({ ...mongo.collections, dueWrites: new DueWriteOrder() }, docs);
    deliveryProcess(mongo, 'proc-1').start();
    deliveryProcess(mongo, 'proc-2').start();
    const paths = ['/two-a', '/two-b', '/two-c', '/two-d'];
    await db.until(async () => paths.reduce((n, p) => n + receiver.received(p).length, 0) >= 200, 60_000, '200 deliveries');
    // Every outcome recorded (the records are flushed in batches: on a loaded machine that can take seconds)...
    const succeeded = () => mongo.collections.deliveries.countDocuments({ _id: { $in: docs.map((d) => d._id) }, state: 'succeeded' });
    await db.until(async () => (await succeeded()) >= 200, 30_000, '200 deliveries recorded as succeeded');
    // ...and nothing sent twice meanwhile.
    await sleep(2000);
    const sent = paths.flatMap((p) => receiver.received(p).map((r) => r.headers['x-service-delivery'] as string));
    expect(sent).to.have.length(200);
    expect(new Set(sent).size).to.equal(200);
    expect(await succeeded()).to.equal(200);
  });

  it('sends a retry that fell due while no delivery process ran once one starts', async () => {
    const own = { ...env, MONGO_DB: `${env.MONGO_DB}_down`, EVENTS_TOPIC: `${env.EVENTS_TOPIC}-down`, WEBHOOK_RETRY_SCHEDULE: '4s' };
    const db = new TestDb(own);
    const account = newAccountId();
    let calls = 0;
    receiver.on('/down', () => (++calls === 1 ? { status: 500 } : { status: 200 }));
    await db.subscribe(account, receiver.url('/down'), ['*']);
    const first = await startDelivery(loadDeliveryConfig(own));
    let closed = false;
    atFileEnd(() => (closed ? undefined : first.close()));
    await waitForGroup(own);
    await new TestLog(own).publish([envelope(account, 'call.started')]);
    const [attempt] = await receiver.waitFor('/down', 1, 20_000);
    const id = attempt!.headers['x-service-delivery'] as string;
    const stored = await db.until(async () => {
      const d = await db.collection('deliveries').findOne({ _id: id });
      return d?.state === 'pending' && d;
    }, 10_000, 'the retry stored');
    await first.close();
    closed = true;
    const due = (stored.next_attempt_at as Date).getTime();
    expect(Date.now(), 'the first process stopped before the retry was due').to.be.below(due);
    // Due, and its bucket over, while nothing runs.
    await untilOver(bucketOf(due));
    await sleep(500);
    expect(receiver.received('/down')).to.have.length(1);
    const startedAt = Date.now();
    const second = await startDelivery(loadDeliveryConfig({ ...own, INSTANCE_ID: uniqueName('dw') }));
    atFileEnd(() => second.close());
    const both = await receiver.waitFor('/down', 2, 20_000);
    expect(both[1]!.headers['x-service-delivery'], 'the same delivery id').to.equal(id);
    expect(both[1]!.at).to.be.at.least(startedAt);
    await db.until(async () => (await db.collection('deliveries').findOne({ _id: id }))?.state === 'succeeded', 10_000, 'succeeded');
    const c = createMongo(loadDeliveryConfig(own));
    try {
      expect(await readDueCursor(c.collections.retryDue), 'the cursor was stored').to.be.a('number');
    } finally {
      await c.close();
    }
  });

  it('a fresh delivery whose first retry falls due while its record\'s flush is still running is sent again, not left pending', async () => {
    const { mongo, env: own } = await freshStore('heldfresh');
    const db = new TestDb(own);
    let calls = 0;
    receiver.on('/held-fresh', () => (++calls === 1 ? { status: 500 } : { status: 200 }));
    const sub = await db.subscribe(newAccountId(), receiver.url('/held-fresh'), ['*']);
    const cfg = loadDeliveryConfig(own).webhooks;
    const sender = createSender({ policy: { allowPrivate: true }, resolve: async () => ['127.0.0.1'], caPem: readFileSync(receiver.caFile, 'utf8'), timeoutMs: 4000, userAgent: 't' });
    let release!: () => void;
    const flushDone = new Promise<void>((r) => (release = r));
    let recorded!: (a: AttemptRecord) => void;
    const firstRecorded = new Promise<AttemptRecord>((r) => (recorded = r));
    const shared = { log: silent, collections: { ...mongo.collections, dueWrites: new DueWriteOrder() }, owner: 'proc-heldfresh', leaseMs: cfg.leaseMs, clock: () => new Date() };
    // The flush that stored the failed delivery (and its due entry) goes on with slow writes: the
    // delivery stays held here until its retry's bucket is over and read.
    const hooks = {
      afterRecord: async (a: AttemptRecord) => {
        if (a.attempt !== 1) return;
        recorded(a);
        await flushDone;
      },
    };
    const dispatcher = new Dispatcher({ ...shared, sender, box: new SecretBox(cfg.secretKey), retrySchedule: [1000], hooks }, { concurrency: 8, perSubscription: 8 });
    const scheduler = new RetryScheduler({ ...shared, dispatcher, intervalMs: 50 });
    atFileEnd(async () => {
      release();
      await scheduler.stop();
      await dispatcher.stop(5000);
      sender.close();
    });
    scheduler.start();
    const delivery = newDelivery({ eventId: `evt_${uniqueName('hf')}`, eventType: 'call.started', accountId: sub.account_id, subscription: sub, body: '{"id":"x"}', owner: 'proc-heldfresh', now: new Date(), leaseMs: cfg.leaseMs });
    expect(dispatcher.enqueue(logJob(delivery, () => undefined))).to.equal('queued');
    const first = await firstRecorded;
    const due = first.nextAttemptAt!.getTime();
    // The scheduler has read the retry's bucket while the delivery was held here.
    await db.until(async () => ((await readDueCursor(mongo.collections.retryDue)) ?? 0) > bucketOf(due), 20_000, 'the retry bucket read');
    expect(dispatcher.holds(delivery._id)).to.equal(true);
    release();
    const both = await receiver.waitFor('/held-fresh', 2, 20_000);
    expect(both.map((r) => r.headers['x-service-delivery'])).to.deep.equal([delivery._id, delivery._id]);
    await db.until(async () => (await mongo.collections.deliveries.findOne({ _id: delivery._id }))?.state === 'succeeded', 10_000, 'succeeded');
  });

  it('finds the pending deliveries an earlier version stored (no bucket entry) at the first boot', async () => {
    const { mongo, env: own } = await freshStore('old');
    const db = new TestDb(own);
    receiver.on('/old', () => ({ status: 200 }));
    const sub = await db.subscribe(newAccountId(), receiver.url('/old'), ['*']);
    const id = `dlv_old_${uniqueName('x')}`;
    // Written as the previous version did: the delivery alone.
    await mongo.collections.deliveries.insertOne(pending(id, sub, { next_attempt_at: new Date(Date.now() - 60_000) }));
    deliveryProcess(mongo, 'proc-old').start();
    const [got] = await receiver.waitFor('/old', 1, 20_000);
    expect(got!.headers['x-service-delivery']).to.equal(id);
  });
});
