/**
 * The delivery process against real Kafka, the real Mongo server and a real
 * HTTPS receiver: events produced to the topic become signed POSTs.
 */
import { expect } from 'chai';
import { encodeCursor } from '#shared/cursor.js';
import { verifyServiceSignature, verifyStandardWebhook } from '#shared/signing.js';
import { failTimes, hang, ok, Receiver, status } from '#test-support/receiver.js';
import { deliveryId } from '#shared/mongo/delivery-queue.js';
import { USER_AGENT } from '../src/deps.js';
import { deliveryTestEnv, envelope, newAccountId, startTestDelivery, TestDb, TestLog, waitForGroup } from './support/delivery.js';

/**
 * Head-of-line blocking behind a hung receiver would show as at least the 4 s
 * attempt timeout; arriving well before it proves isolation without a timing
 * target that flakes on a loaded machine (the latency figure itself is
 * measured by the benchmark, scenario 5: a few milliseconds when quiet).
 */
const ISOLATED_MS = 3000;

describe('webhook delivery process', function () {
  this.timeout(60_000);
  let receiver: Receiver;
  let env: Record<string, string>;
  let log: TestLog;
  let db: TestDb;

  before(async function () {
    this.timeout(90_000);
    receiver = await Receiver.start();
    env = deliveryTestEnv(receiver.caFile);
    await startTestDelivery(env);
    await waitForGroup(env);
    log = new TestLog(env);
    db = new TestDb(env);
  });
  after(() => receiver.close());

  it('POSTs the event record, signed both ways, with the service headers', async () => {
    const account = newAccountId();
    const sub = await db.subscribe(account, receiver.url('/e2e'), ['*']);
    const ev = envelope(account, 'call.started', { call_id: 'c1', from: '+15550001' });
    const [meta] = await log.publish([ev]);
    const [req] = await receiver.waitFor('/e2e', 1);
    const raw = req!.raw;
    const h = req!.headers;

    expect(JSON.parse(raw.toString())).to.deep.equal({
      id: ev.id,
      type: 'call.started',
      created_at: ev.created_at,
      data: { call_id: 'c1', from: '+15550001' },
      cursor: encodeCursor({ partition: meta!.partition, offset: BigInt(meta!.baseOffset!) }),
    });
    expect(h['content-type']).to.equal('application/json');
    expect(h['x-service-event']).to.equal('call.started');
    expect(h['x-service-delivery']).to.equal(deliveryId(ev.id, sub._id));
    expect(h['webhook-id']).to.equal(h['x-service-delivery']);
    expect(h['user-agent']).to.equal(USER_AGENT);
    expect(Math.abs(Number(h['webhook-timestamp']) - Date.now() / 1000)).to.be.below(30);
    expect(verifyServiceSignature(sub.secret, raw, h['x-service-signature'] as string)).to.equal(true);
    expect(verifyServiceSignature(sub.secret, Buffer.concat([raw, Buffer.from(' ')]), h['x-service-signature'] as string)).to.equal(false);
    expect(verifyStandardWebhook(sub.secret, raw, h as Record<string, string>)).to.equal(true);
  });

  it('filters by type list vs ["*"], and sends a ping only to the subscription it targets', async () => {
    const account = newAccountId();
    const all = await db.subscribe(account, receiver.url('/f-all'), ['*']);
    await db.subscribe(account, receiver.url('/f-calls'), ['call.ended', 'message.sent']);
    const other = await db.subscribe(newAccountId(), receiver.url('/f-other'), ['*']);
    await log.publish([
      envelope(account, 'call.started'),
      envelope(account, 'call.ended'),
      envelope(account, 'message.received'),
      envelope(account, 'message.sent'),
      envelope(account, 'webhook.ping', { subscription_id: all._id }, { target_subscription_id: all._id }),
    ]);
    const got = await receiver.waitFor('/f-all', 5);
    const calls = await receiver.waitFor('/f-calls', 2);
    // Give stray deliveries a moment to show up before asserting they did not.
    await new Promise((r) => setTimeout(r, 1500));
    expect(got.map((r) => r.body.type).sort()).to.deep.equal(['call.ended', 'call.started', 'message.received', 'message.sent', 'webhook.ping']);
    expect(receiver.received('/f-calls').map((r) => r.body.type).sort()).to.deep.equal(['call.ended', 'message.sent']);
    expect(calls.every((r) => r.body.type !== 'webhook.ping')).to.equal(true);
    expect(receiver.received('/f-other')).to.have.length(0);
    expect(other._id).to.be.a('string');
  });

  it('records last_status, last_delivery_at and last_error after a 200, a 500 and a hang', async () => {
    const account = newAccountId();
    receiver.on('/s-500', status(500));
    receiver.on('/s-hang', hang);
    const s200 = await db.subscribe(account, receiver.url('/s-200'), ['message.sent']);
    const s500 = await db.subscribe(account, receiver.url('/s-500'), ['message.sent']);
    const sHang = await db.subscribe(account, receiver.url('/s-hang'), ['message.sent']);
    const before = new Date();
    await log.publish([envelope(account, 'message.sent', { to: '+1555' })]);

    const w200 = await db.until(async () => (await db.webhook(s200._id))?.last_delivery_at && db.webhook(s200._id), 20_000, '200 recorded');
    expect(w200).to.include({ last_status: 200, last_error: null });
    expect(w200!.last_delivery_at!.getTime()).to.be.at.least(before.getTime() - 1000);

    const w500 = await db.until(async () => (await db.webhook(s500._id))?.last_delivery_at && db.webhook(s500._id), 20_000, '500 recorded');
    expect(w500).to.include({ last_status: 500, last_error: null });

    const wHang = await db.until(async () => (await db.webhook(sHang._id))?.last_delivery_at && db.webhook(sHang._id), 20_000, 'timeout recorded');
    expect(wHang).to.include({ last_status: null, last_error: 'timeout' });
    const [first] = await db.attempts(sHang._id);
    expect(first).to.include({ outcome: 'timeout', status: null, attempt: 1 });
    expect(first.duration_ms).to.be.within(3900, 5000);
  });

  it('retries a failing receiver with the same delivery id until it succeeds, recording every attempt', async () => {
    const account = newAccountId();
    receiver.on('/retry', failTimes(2));
    const sub = await db.subscribe(account, receiver.url('/retry'), ['call.completed']);
    const ev = envelope(account, 'call.completed', { summary: 'ok' });
    await log.publish([ev]);
    const reqs = await receiver.waitFor('/retry', 3, 30_000);
    const ids = reqs.map((r) => r.headers['x-service-delivery']);
    expect(ids).to.deep.equal([ids[0], ids[0], ids[0]]);
    expect(reqs.map((r) => r.headers['webhook-id'])).to.deep.equal(ids);
    expect(reqs.every((r) => r.raw.equals(reqs[0]!.raw))).to.equal(true);
    // The schedule is 1s ±20 % between attempts.
    expect(reqs[1]!.at - reqs[0]!.at).to.be.at.least(700);

    const attempts = await db.until(async () => {
      const list = await db.attempts(sub._id);
      return list.length === 3 && list[2].outcome === 'ok' && list;
    }, 10_000, 'three attempts');
    expect(attempts.map((a) => [a.attempt, a.status, a.outcome])).to.deep.equal([
      [1, 500, 'http_5xx'],
      [2, 500, 'http_5xx'],
      [3, 200, 'ok'],
    ]);
    expect(attempts.every((a) => a.delivery_id === ids[0] && a.event_id === ev.id)).to.equal(true);
    expect(attempts[0].next_attempt_at).to.be.an.instanceOf(Date);
    expect(attempts[2].next_attempt_at).to.equal(null);
    // The attempt is recorded first, the delivery's state right after it.
    const delivery = await db.until(async () => {
      const d = await db.collection('deliveries').findOne({ _id: ids[0] });
      return d?.state === 'succeeded' && d;
    }, 10_000, 'delivery succeeded');
    expect(delivery).to.include({ state: 'succeeded', attempts: 3, lease_owner: null });
    expect((await db.webhook(sub._id))?.last_status).to.equal(200);
  });

  it('gives up after the last scheduled retry and keeps the last status (a 404) on record', async () => {
    const account = newAccountId();
    receiver.on('/gone', status(404));
    const sub = await db.subscribe(account, receiver.url('/gone'), ['call.takeover']);
    await log.publish([envelope(account, 'call.takeover')]);
    // 1 attempt + 3 retries with the test schedule "1s,1s,1s".
    await receiver.waitFor('/gone', 4, 30_000);
    const delivery = await db.until(
      async () => db.collection('deliveries').findOne({ subscription_id: sub._id, state: 'failed' }),
      10_000,
      'delivery given up',
    );
    expect(delivery.attempts).to.equal(4);
    await new Promise((r) => setTimeout(r, 2000));
    expect(receiver.received('/gone')).to.have.length(4);
    expect((await db.attempts(sub._id)).map((a) => a.status)).to.deep.equal([404, 404, 404, 404]);
    expect(await db.webhook(sub._id)).to.include({ last_status: 404 });
  });

  it('keeps a healthy receiver on time while another one hangs', async () => {
    const account = newAccountId();
    receiver.on('/iso-hang', hang).on('/iso-ok', ok);
    await db.subscribe(account, receiver.url('/iso-hang'), ['*']);
    await db.subscribe(account, receiver.url('/iso-ok'), ['*']);
    // A first wave occupies the hanging receiver for its full 4 s timeouts...
    const firstSent = Date.now();
    await log.publishAtOnce([1, 2, 3, 4, 5].map((n) => envelope(account, 'message.received', { n })));
    const first = await receiver.waitFor('/iso-ok', 5, 10_000);
    for (const r of first) expect(r.at - firstSent).to.be.below(ISOLATED_MS);
    // ...while a later event, in a later batch, still reaches the healthy receiver at once.
    await receiver.waitFor('/iso-hang', 1, 10_000);
    const sent = Date.now();
    await log.publishAtOnce([envelope(account, 'message.received', { n: 6 })]);
    const reqs = await receiver.waitFor('/iso-ok', 6, 10_000);
    const sixth = reqs.find((r) => r.body.data.n === 6)!;
    expect(sixth.at - sent).to.be.below(ISOLATED_MS);
    expect(receiver.received('/iso-hang').every((r) => Date.now() - r.at < 4500)).to.equal(true); // still hanging meanwhile
  });

  it('drops the pending deliveries of a deleted subscription instead of sending them', async () => {
    const account = newAccountId();
    receiver.on('/deleted', status(500));
    const sub = await db.subscribe(account, receiver.url('/deleted'), ['*']);
    await log.publish([envelope(account, 'call.started')]);
    await receiver.waitFor('/deleted', 1);
    await db.collection('webhooks').deleteOne({ _id: sub._id });
    await db.until(async () => (await db.collection('deliveries').countDocuments({ subscription_id: sub._id })) === 0, 10_000, 'delivery dropped');
    expect(receiver.received('/deleted')).to.have.length(1);
  });
});

describe('webhook delivery isolation under saturation', function () {
  this.timeout(60_000);

  it('a hung receiver with a backlog takes only its share of slots; others stay on time', async () => {
    const receiver = await Receiver.start();
    try {
      const base = deliveryTestEnv(receiver.caFile);
      // Four slots in all, at most two per subscription.
      const env = deliveryTestEnv(receiver.caFile, {
        EVENTS_TOPIC: `${base.EVENTS_TOPIC}-saturate`,
        MONGO_DB: `${base.MONGO_DB}_saturate`,
        WEBHOOK_CONCURRENCY: '4',
        WEBHOOK_CONCURRENCY_PER_SUBSCRIPTION: '2',
      });
      await startTestDelivery(env);
      await waitForGroup(env);
      const db = new TestDb(env);
      const log = new TestLog(env);
      const account = newAccountId();
      receiver.on('/sat-hang', hang);
      await db.subscribe(account, receiver.url('/sat-hang'), ['call.started']);
      await db.subscribe(account, receiver.url('/sat-ok'), ['message.sent']);
      await log.publishAtOnce([...Array(12).keys()].map((n) => envelope(account, 'call.started', { n })));
      await receiver.waitFor('/sat-hang', 2, 10_000);
      const sent = Date.now();
      await log.publishAtOnce([...Array(6).keys()].map((n) => envelope(account, 'message.sent', { n })));
      const reqs = await receiver.waitFor('/sat-ok', 6, 10_000);
      expect(Math.max(...reqs.map((r) => r.at)) - sent).to.be.below(ISOLATED_MS);
      // The hung receiver never had more than two attempts open at once.
      expect(receiver.received('/sat-hang').length).to.be.at.most(4);
    } finally {
      await receiver.close();
    }
  });
});
