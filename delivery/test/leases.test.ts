/**
 * The lease protocol on the real Mongo server: two delivery processes never
 * send the same attempt, a dead holder's deliveries are taken over, and a
 * re-consumed batch creates no second delivery. Also DNS rebinding at
 * delivery time through a full worker whose private-target setting is off.
 */
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { pino } from 'pino';
import { loadWebhookConfig } from '#shared/config/webhooks.js';
import type { DeliveryDoc } from '#shared/mongo/index.js';
import { createMongo, ensureIndexes, type Mongo } from '#shared/mongo/index.js';
import { bucketOf, DueWriteOrder, insertDeliveries } from '#shared/mongo/delivery-queue.js';
import { SecretBox } from '#shared/secrets.js';
import { Receiver } from '#test-support/receiver.js';
import { uniqueName } from '#test-support/env.js';
import { atFileEnd } from '#test-support/cleanup.js';
import { loadDeliveryConfig } from '../src/config.js';
import { scheduleBatch } from '../src/consumer.js';
import { decodeMessage } from '../src/event-match.js';
import { claim, type AttemptRecord, type DeliveryCollections } from '../src/deliveries.js';
import { Dispatcher } from '../src/dispatch.js';
import { storeJob } from '../src/jobs.js';
import { createSender } from '../src/http-sender.js';
import { AttemptRecorder } from '../src/recorder.js';
import { sweepOnce } from '../src/retention.js';
import { RetryScheduler } from '../src/retry-scheduler.js';
import { deliveryTestEnv, envelope, newAccountId, startTestDelivery, TestDb, TestLog, waitForGroup } from './support/delivery.js';

const silent = pino({ level: 'silent' });

describe('delivery leases and safety', function () {
  this.timeout(60_000);
  let receiver: Receiver;
  let env: Record<string, string>;
  let mongo: Mongo;
  /** The test's own writes to the store: one more process beside the delivery processes it starts. */
  let own: DeliveryCollections;
  let db: TestDb;

  before(async () => {
    receiver = await Receiver.start();
    env = deliveryTestEnv(receiver.caFile, { MONGO_DB: `${deliveryTestEnv('x').MONGO_DB}_leases` });
    mongo = createMongo(loadDeliveryConfig(env));
    own = { ...mongo.collections, dueWrites: new DueWriteOrder() };
    atFileEnd(() => mongo.close());
    await ensureIndexes(mongo, silent);
    db = new TestDb(env);
  });
  after(() => receiver.close());

  /** A dispatcher + retry scheduler pair as one delivery process runs them, without Kafka. */
  function deliveryProcess(owner: string): { dispatcher: Dispatcher; scheduler: RetryScheduler; collections: DeliveryCollections } {
    const cfg = loadDeliveryConfig(env).webhooks;
    const sender = createSender({ policy: { allowPrivate: true }, resolve: async () => ['127.0.0.1'], caPem: readFileSync(receiver.caFile, 'utf8'), timeoutMs: 4000, userAgent: 't' });
    const collections: DeliveryCollections = { ...mongo.collections, dueWrites: new DueWriteOrder() };
    const shared = { log: silent, collections, owner, leaseMs: cfg.leaseMs, clock: () => new Date() };
    const dispatcher = new Dispatcher({ ...shared, sender, box: new SecretBox(cfg.secretKey), retrySchedule: cfg.retrySchedule }, { concurrency: 16, perSubscription: 16 });
    const scheduler = new RetryScheduler({ ...shared, dispatcher, intervalMs: 50 });
    atFileEnd(async () => {
      await scheduler.stop();
      await dispatcher.stop(5000);
      sender.close();
    });
    return { dispatcher, scheduler, collections };
  }

  function pending(id: string, sub: { _id: string; account_id: string }, over: Partial<DeliveryDoc> = {}): DeliveryDoc {
    const now = new Date();
    return {
      _id: id,
      account_id: sub.account_id,
      subscription_id: sub._id,
      event_id: 'evt_' + id,
      event_type: 'call.started',
      body: JSON.stringify({ id: 'evt_' + id }),
      state: 'pending',
      attempts: 0,
      next_attempt_at: now,
      claim_seq: 1,
      lease_owner: null,
      lease_until: null,
      last_status: null,
      last_outcome: null,
      created_at: now,
      updated_at: now,
      ...over,
    };
  }

  it('three processes claiming the same due deliveries send each attempt exactly once', async () => {
    // Every delivery fails once then succeeds: two claims per delivery, on different processes or not.
    const seen = new Set<string>();
    receiver.on('/race', (_n, req) => {
      const id = req.headers['x-service-delivery'] as string;
      if (seen.has(id)) return { status: 200 };
      seen.add(id);
      return { status: 503 };
    });
    const sub = await db.subscribe(newAccountId(), receiver.url('/race'), ['*']);
    const ids = Array.from({ length: 60 }, (_, i) => `dlv_race_${i}_${uniqueName('x')}`);
    await insertDeliveries(own, ids.map((id) => pending(id, sub)));
    for (const owner of ['proc-a', 'proc-b', 'proc-c']) deliveryProcess(owner).scheduler.start();
    await receiver.waitFor('/race', 120, 40_000);
    await db.until(async () => (await mongo.collections.deliveries.countDocuments({ subscription_id: sub._id, state: 'succeeded' })) === 60, 10_000, 'all succeeded');
    await new Promise((r) => setTimeout(r, 1500));
    const sent = receiver.received('/race').map((r) => r.headers['x-service-delivery'] as string);
    const perDelivery = new Map<string, number>();
    for (const id of sent) perDelivery.set(id, (perDelivery.get(id) ?? 0) + 1);
    expect(sent).to.have.length(120);
    expect([...perDelivery.values()].every((n) => n === 2)).to.equal(true);
    const attempts = await db.attempts(sub._id);
    expect(attempts).to.have.length(120);
    expect(attempts.filter((a) => a.attempt === 1).every((a) => a.status === 503)).to.equal(true);
    expect(attempts.filter((a) => a.attempt === 2).every((a) => a.status === 200)).to.equal(true);
  });

  it('takes over a delivery whose holder died once its lease has run out, not before', async () => {
    const sub = await db.subscribe(newAccountId(), receiver.url('/takeover'), ['*']);
    // The live lease ends 8 s from now: the expired one is sent before that even on a loaded machine (3 s was not).
    const future = new Date(Date.now() + 8000);
    await insertDeliveries(own, [
      pending('dlv_dead_expired_' + uniqueName('x'), sub, { lease_owner: 'dead', lease_until: new Date(Date.now() - 1000) }),
      pending('dlv_dead_live_' + uniqueName('x'), sub, { lease_owner: 'dead', lease_until: future }),
    ]);
    const { scheduler } = deliveryProcess('proc-c');
    scheduler.start();
    const [first] = await receiver.waitFor('/takeover', 1, 10_000);
    expect(first!.headers['x-service-delivery']).to.match(/^dlv_dead_expired_/);
    expect(Date.now()).to.be.below(future.getTime());
    const both = await receiver.waitFor('/takeover', 2, 20_000);
    expect(both[1]!.at).to.be.at.least(future.getTime());
  });

  it('takes over a delivery whose claimer died between taking a claim and recording it, once that lease is over', async () => {
    const sub = await db.subscribe(newAccountId(), receiver.url('/orphan'), ['*']);
    const leaseMs = loadDeliveryConfig(env).webhooks.leaseMs;
    const expired = new Date(Date.now() - 1000);
    const orphan = 'dlv_orphan_' + uniqueName('x');
    const fresh = 'dlv_orphan_fresh_' + uniqueName('x');
    // Both rest at claim 1 with an expired lease; claim 2 was taken by a process that died before recording it.
    // The claims go in first: the dispatchers of the tests above still run and would take claim 2 of a
    // delivery they see pending (a duplicate key here, once, in a full run).
    await mongo.collections.claims.insertMany([
      { _id: `${orphan}:2`, delivery_id: orphan, owner: 'dead', at: new Date(Date.now() - leaseMs - 1000) },
      { _id: `${fresh}:2`, delivery_id: fresh, owner: 'dying', at: new Date() }, // its lease is not over yet
    ]);
    await insertDeliveries(own, [pending(orphan, sub, { lease_owner: 'dead', lease_until: expired }), pending(fresh, sub, { lease_owner: 'dead', lease_until: expired })]);
    const { scheduler } = deliveryProcess('proc-d');
    scheduler.start();
    const [first] = await receiver.waitFor('/orphan', 1, 10_000);
    expect(first!.headers['x-service-delivery']).to.equal(orphan);
    await db.until(async () => (await mongo.collections.deliveries.findOne({ _id: orphan }))?.state === 'succeeded', 10_000, 'orphan delivered');
    expect((await mongo.collections.deliveries.findOne({ _id: orphan }))?.claim_seq, 'claimed past the orphaned claim').to.equal(3);
    await new Promise((r) => setTimeout(r, 1500));
    expect(receiver.received('/orphan').map((r) => r.headers['x-service-delivery']), 'a claim still within its lease is respected').to.deep.equal([orphan]);
  });

  it('records an attempt on the delivery only while the claim it was sent under is still the current one', async () => {
    const sub = { _id: `wh_${uniqueName('fence')}`, account_id: newAccountId() };
    const recorder = new AttemptRecorder(own);
    const outcome = (delivery: DeliveryDoc, status: number): AttemptRecord => ({ delivery, attempt: 1, status, outcome: status === 200 ? 'ok' : 'http_5xx', error: null, durationMs: 5, at: new Date(), nextAttemptAt: new Date(Date.now() + 60_000) });

    // Leased far ahead, so the dispatchers of the tests above leave them alone.
    const lease = { lease_until: new Date(Date.now() + 600_000), next_attempt_at: new Date(Date.now() + 600_000) };
    const stale = pending(`dlv_${uniqueName('stale')}`, sub, { claim_seq: 2, lease_owner: 'old', ...lease });
    await mongo.collections.deliveries.insertOne({ ...stale, claim_seq: 3, lease_owner: 'new' }); // taken over since
    await recorder.record(outcome(stale, 200), `att_${stale._id}`);
    const after = await mongo.collections.deliveries.findOne({ _id: stale._id });
    expect(after).to.include({ state: 'pending', claim_seq: 3, lease_owner: 'new', attempts: 0 });
    expect(await mongo.collections.attempts.countDocuments({ delivery_id: stale._id }), 'the attempt itself is recorded').to.equal(1);

    const held = pending(`dlv_${uniqueName('held')}`, sub, { claim_seq: 2, lease_owner: 'me', ...lease });
    await mongo.collections.deliveries.insertOne(held);
    await recorder.record(outcome(held, 200), `att_${held._id}`);
    expect(await mongo.collections.deliveries.findOne({ _id: held._id })).to.include({ state: 'succeeded', attempts: 1, lease_owner: null, last_status: 200 });
  });

  it('a holder buckets a lease check at the end of every lease it renews (the re-claim before sending, the keeper\'s extensions)', async () => {
    const account = newAccountId();
    receiver.on('/renew', () => ({ status: 200 }));
    const sub = await db.subscribe(account, receiver.url('/renew'), ['*']);
    const cfg = loadDeliveryConfig(env).webhooks;
    const sender = createSender({ policy: { allowPrivate: true }, resolve: async () => ['127.0.0.1'], caPem: readFileSync(receiver.caFile, 'utf8'), timeoutMs: 4000, userAgent: 't' });
    let release!: () => void;
    const recordHeld = new Promise<void>((r) => (release = r));
    const leaseMs = 2000;
    // The record waits (a slow store): the delivery stays held here while its lease is extended.
    const dispatcher = new Dispatcher(
      { log: silent, collections: own, sender, box: new SecretBox(cfg.secretKey), owner: 'proc-renew', leaseMs, retrySchedule: cfg.retrySchedule, clock: () => new Date(), hooks: { beforeRecord: () => recordHeld } },
      { concurrency: 4, perSubscription: 4 },
    );
    try {
      const start = Date.now();
      const doc = pending(`dlv_${uniqueName('renew')}`, sub, { next_attempt_at: new Date(start + 600_000) });
      await mongo.collections.deliveries.insertOne(doc);
      // Taken from the store (its own lease check is not what this test is about), then queued:
      // its lease is shorter than the margin, so run() re-claims it before sending.
      const held = await claim(own, doc, 'proc-renew', new Date(), leaseMs);
      expect(held).to.not.equal(null);
      expect(dispatcher.enqueue(storeJob(held!))).to.equal('queued');
      await receiver.waitFor('/renew', 1, 10_000);
      // The keeper extends it (less than half its length left) at least once after the re-claim.
      const extended = await db.until(async () => {
        const d = await mongo.collections.deliveries.findOne({ _id: doc._id });
        return d && d.claim_seq >= 4 && d;
      }, 15_000, 'the lease extended');
      const until = extended.lease_until!.getTime();
      // The buckets' slots, read by _id without sealing (the newest is not over yet).
      const entries: { d: string; t: number }[] = [];
      for (let b = bucketOf(start); b <= bucketOf(until); b++) {
        for (let n = 0; ; n++) {
          const slot = (await mongo.collections.retryDue.findOne({ _id: `due:${b}:${n}` })) as { entries?: { d: string; t: number }[]; sealed?: boolean } | null;
          if (!slot || slot.sealed) break;
          entries.push(...(slot.entries ?? []).filter((e) => e.d === doc._id));
        }
      }
      const times = [...new Set(entries.map((e) => e.t))].sort();
      expect(times, 'a lease check at the latest lease end').to.include(until);
      expect(times.length, 'one for the re-claim, one per extension').to.be.at.least(2);
    } finally {
      release();
      await dispatcher.stop(5000);
      sender.close();
    }
  });

  it('creates no second delivery when a batch is consumed again', async () => {
    const account = newAccountId();
    await db.subscribe(account, receiver.url('/again'), ['*']);
    const { dispatcher, collections } = deliveryProcess('proc-d');
    const msg = (offset: string, ev: object) => ({ key: null, value: Buffer.from(JSON.stringify(ev)), offset, timestamp: '0', attributes: 0, headers: {} }) as never;
    const events = [envelope(account, 'call.started'), envelope(account, 'call.ended')].map((e, i) => decodeMessage(msg(String(i), e), 0, silent)!);
    const deps = { log: silent, collections, dispatcher, owner: 'proc-d', leaseMs: 8000, clock: () => new Date() };
    expect(await scheduleBatch(deps, events)).to.equal(2);
    expect(await scheduleBatch(deps, events)).to.equal(0);
    await receiver.waitFor('/again', 2);
    await new Promise((r) => setTimeout(r, 1000));
    expect(receiver.received('/again')).to.have.length(2);
  });

  it('sweeps attempts and finished deliveries past retention, and old claims, keeping pending work', async () => {
    const sub = await db.subscribe(newAccountId(), receiver.url('/sweep'), ['*']);
    const now = new Date();
    const old = new Date(now.getTime() - 31 * 24 * 3600 * 1000);
    const tag = uniqueName('sweep');
    const c = own;
    await c.deliveries.insertMany([
      pending(`dlv_${tag}_old_done`, sub, { state: 'succeeded', updated_at: old, next_attempt_at: null }),
      pending(`dlv_${tag}_old_pending`, sub, { updated_at: old, next_attempt_at: new Date(now.getTime() + 3_600_000) }),
      pending(`dlv_${tag}_new_done`, sub, { state: 'failed', next_attempt_at: null }),
    ]);
    const attempt = (id: string, at: Date) => ({
      _id: id, delivery_id: 'd', subscription_id: sub._id, account_id: sub.account_id, event_id: 'e', event_type: 'call.started' as const,
      attempt: 1, status: 200, outcome: 'ok' as const, error: null, duration_ms: 1, at, next_attempt_at: null,
    });
    await c.attempts.insertMany([attempt(`att_${tag}_old`, old), attempt(`att_${tag}_new`, now)]);
    await c.claims.insertMany([
      { _id: `${tag}:old`, delivery_id: 'd', owner: 'x', at: new Date(now.getTime() - 2 * 24 * 3600 * 1000) },
      { _id: `${tag}:new`, delivery_id: 'd', owner: 'x', at: now },
    ]);
    await sweepOnce(c, now, 30 * 24 * 3600 * 1000);
    const left = async (coll: 'deliveries' | 'attempts' | 'claims') =>
      (await (c[coll] as any).find({ _id: { $regex: tag } }).toArray()).map((d: { _id: string }) => d._id).sort();
    expect(await left('deliveries')).to.deep.equal([`dlv_${tag}_new_done`, `dlv_${tag}_old_pending`]);
    expect(await left('attempts')).to.deep.equal([`att_${tag}_new`]);
    expect(await left('claims')).to.deep.equal([`${tag}:new`]);
  });

  it('blocks a name that resolved to a public address at creation but resolves inside at delivery', async () => {
    const strictEnv = deliveryTestEnv(receiver.caFile, {
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'false',
      // The receiver's port is allowed: the rule under test is the address rule.
      WEBHOOK_ALLOWED_PORTS: String(receiver.port),
      EVENTS_TOPIC: `${env.EVENTS_TOPIC}-rebind`,
      MONGO_DB: `${env.MONGO_DB}_rebind`,
    });
    // At delivery time the name answers 127.0.0.1, where the receiver listens.
    const lookups: string[] = [];
    await startTestDelivery(strictEnv, async (name) => (lookups.push(name), ['127.0.0.1']));
    await waitForGroup(strictEnv);
    const strictDb = new TestDb(strictEnv);
    const account = newAccountId();
    const sub = await strictDb.subscribe(account, receiver.url('/rebind', 'rebind.webhooks.test'), ['*']);
    await new TestLog(strictEnv).publish([envelope(account, 'call.started')]);
    const [attempt] = await strictDb.until(async () => {
      const list = await strictDb.attempts(sub._id);
      return list.length > 0 && list;
    }, 20_000, 'blocked attempt');
    expect(attempt).to.include({ outcome: 'blocked_address', status: null });
    // The rule it broke, never the inside address the name pointed at.
    expect(attempt.error).to.match(/resolves to a private or internal address/);
    expect(attempt.error).to.not.match(/127\.0\.0\.1/);
    expect(lookups).to.include('rebind.webhooks.test');
    const w = await strictDb.until(async () => (await strictDb.webhook(sub._id))?.last_error && strictDb.webhook(sub._id), 10_000, 'last_error');
    expect(w).to.include({ last_status: null, last_error: 'blocked_address' });
    expect(receiver.received('/rebind')).to.have.length(0);
    expect(loadWebhookConfig(strictEnv, false).allowPrivateTargets).to.equal(false);
  });
});
