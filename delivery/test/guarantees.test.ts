/**
 * Delivery guarantees against real Kafka, the real Mongo server
 * and a real HTTPS receiver: a deleted subscription gets nothing once its
 * DELETE has returned, a subscription gets no event older than itself, a new
 * delivery group starts at the end of the log, and permanent failures are
 * not retried.
 */
import { expect } from 'chai';
import { Kafka, logLevel } from 'kafkajs';
import { verifyServiceSignature } from '#shared/signing.js';
import { SUBSCRIPTION_FENCE_MS } from '#shared/subscription-fence.js';
import { Receiver } from '#test-support/receiver.js';
import { uniqueName } from '#test-support/env.js';
import { deliveryTestEnv, envelope, newAccountId, startTestDelivery, TestDb, TestLog, waitForGroup } from './support/delivery.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Host names whose lookup the test holds until it says so: a send that read
 * its subscription and is now waiting for DNS (then connect and handshake),
 * the window in which a DELETE, PATCH or rotation can return before the
 * request is written.
 */
const heldLookups = new Map<string, { reached: () => void; release: Promise<void> }>();

function holdLookup(host: string): { reached: Promise<void>; release: () => void } {
  let reached!: () => void;
  let release!: () => void;
  const r = new Promise<void>((res) => (reached = res));
  heldLookups.set(host, { reached: () => reached(), release: new Promise<void>((res) => (release = res)) });
  return { reached: r, release: () => release() };
}

/** As the API does after storing a change to a subscription (shared/src/subscription-fence.ts). */
const apiFence = (): Promise<void> => sleep(SUBSCRIPTION_FENCE_MS);

describe('delivery guarantees', function () {
  this.timeout(90_000);
  let receiver: Receiver;
  let env: Record<string, string>;
  let log: TestLog;
  let db: TestDb;

  before(async function () {
    this.timeout(90_000);
    receiver = await Receiver.start();
    env = deliveryTestEnv(receiver.caFile, { MONGO_DB: `${deliveryTestEnv('x').MONGO_DB}_guarantees` });
    // Every name resolves to the local receiver (a name the certificate does not carry plays a mismatch).
    await startTestDelivery(env, async (host) => {
      const held = heldLookups.get(host);
      if (held) {
        heldLookups.delete(host);
        held.reached();
        await held.release;
      }
      return ['127.0.0.1'];
    });
    await waitForGroup(env);
    log = new TestLog(env);
    db = new TestDb(env);
  });
  after(() => receiver.close());

  it('sends nothing to a subscription after its DELETE returned, with many deliveries to it queued', async () => {
    const account = newAccountId();
    const path = '/deleted-busy';
    const sub = await db.subscribe(account, receiver.url(path), ['*']);
    let deletedAt = Infinity;
    let deleting: Promise<void> | null = null;
    receiver.on(path, (n) => {
      // The first 32 attempts (the subscription's slots) are open for 1.5 s and over a
      // hundred deliveries wait behind them: delete halfway through that wait, as the API's
      // DELETE does (the subscription, then its deliveries).
      if (n === 32)
        deleting = sleep(500).then(async () => {
          await db.collection('webhooks').deleteOne({ _id: sub._id });
          await db.collection('deliveries').deleteMany({ subscription_id: sub._id });
          await apiFence();
          deletedAt = Date.now();
        });
      return { status: 200, delayMs: 1500 };
    });
    await log.publishAtOnce(Array.from({ length: 200 }, (_, n) => envelope(account, 'message.sent', { n })));
    await receiver.waitFor(path, 32, 30_000);
    await db.until(async () => deleting !== null, 5000, 'delete started');
    await deleting;
    await sleep(6000);
    const late = receiver.received(path).filter((r) => r.at > deletedAt);
    console.log(`      ${receiver.received(path).length} requests before the delete returned, ${late.length} after`);
    expect(late, 'requests that started after the DELETE returned').to.have.length(0);
  });

  it('writes no request after a DELETE returned, though the send read the subscription before it and was still connecting', async () => {
    const account = newAccountId();
    const host = 'fence-delete.webhooks.test';
    const sub = await db.subscribe(account, receiver.url('/fence-delete', host), ['*']);
    const held = holdLookup(host);
    await log.publish([envelope(account, 'call.started')]);
    // The send has read the subscription (it exists) and waits for DNS: delete it now, as the API does.
    await held.reached;
    await db.collection('webhooks').deleteOne({ _id: sub._id });
    await apiFence();
    const returnedAt = Date.now();
    held.release();
    await sleep(3000);
    expect(receiver.received('/fence-delete').filter((r) => r.at > returnedAt), 'requests written after the DELETE returned').to.have.length(0);
  });

  it('signs with the new secret a send that was connecting while the rotation returned, and sends it once', async () => {
    const account = newAccountId();
    const host = 'fence-rotate.webhooks.test';
    const sub = await db.subscribe(account, receiver.url('/fence-rotate', host), ['*']);
    const held = holdLookup(host);
    const ev = envelope(account, 'call.started');
    await log.publish([ev]);
    await held.reached;
    const secret = await db.rotateSecret(sub._id);
    await apiFence();
    held.release();
    await receiver.waitFor('/fence-rotate', 1, 20_000);
    await sleep(1500);
    const got = receiver.received('/fence-rotate');
    expect(got.map((r) => r.body.id)).to.deep.equal([ev.id]);
    expect(verifyServiceSignature(secret, got[0]!.raw, got[0]!.headers['x-service-signature'] as string), 'signed with the secret of the rotation').to.equal(true);
  });

  it('signs with a rotated secret every attempt that starts after the rotation, queued ones included', async () => {
    const account = newAccountId();
    const path = '/rotated-busy';
    const sub = await db.subscribe(account, receiver.url(path), ['*']);
    let rotated: Promise<{ secret: string; at: number }> | null = null;
    receiver.on(path, (n) => {
      if (n === 32)
        rotated = sleep(500).then(async () => {
          const secret = await db.rotateSecret(sub._id);
          await apiFence();
          return { secret, at: Date.now() };
        });
      return { status: 200, delayMs: 1500 };
    });
    await log.publishAtOnce(Array.from({ length: 100 }, (_, n) => envelope(account, 'message.sent', { n })));
    await receiver.waitFor(path, 100, 60_000);
    const { secret, at } = await rotated!;
    const after = receiver.received(path).filter((r) => r.at > at);
    expect(after.length).to.be.above(0);
    const oldSigned = after.filter((r) => !verifyServiceSignature(secret, r.raw, r.headers['x-service-signature'] as string));
    expect(oldSigned, 'attempts after the rotation signed with the old secret').to.have.length(0);
  });

  it('delivers to a new subscription an event published right after its creation returned, and none that occurred before its created_at', async () => {
    const account = newAccountId();
    const path = '/activation';
    // Created as the API does: created_at a fence ahead, returned once it has come.
    const creating = db.subscribe(account, receiver.url(path), ['*']);
    await sleep(300);
    const during = envelope(account, 'call.started', { n: 'during the create' });
    await log.publish([during]);
    const sub = await creating;
    expect(Date.parse(during.created_at)).to.be.below(sub.created_at.getTime());
    const justBefore = envelope(account, 'call.started', { n: 'just before' }, { created_at: new Date(sub.created_at.getTime() - 1).toISOString() });
    const after = envelope(account, 'call.started', { n: 'right after' });
    await log.publishAtOnce([justBefore, after]);
    await receiver.waitFor(path, 1, 20_000);
    await sleep(1500);
    expect(receiver.received(path).map((r) => r.body.data.n)).to.deep.equal(['right after']);
  });

  it('writes no request of an event type the subscription stopped taking before the send, though it was connecting', async () => {
    const account = newAccountId();
    const host = 'fence-events.webhooks.test';
    const sub = await db.subscribe(account, receiver.url('/fence-events', host), ['call.started', 'message.sent']);
    const held = holdLookup(host);
    await log.publish([envelope(account, 'call.started')]);
    // The send has read the subscription (it takes call.started) and waits for DNS: PATCH events now.
    await held.reached;
    await db.change(sub._id, { events: ['message.sent'] });
    held.release();
    const kept = envelope(account, 'message.sent');
    await log.publish([kept]);
    await receiver.waitFor('/fence-events', 1, 20_000);
    await sleep(1500);
    expect(receiver.received('/fence-events').map((r) => r.body.id), 'only the type it still takes').to.deep.equal([kept.id]);
  });

  it('delivers to a subscription only the events that occurred at or after its creation', async () => {
    const account = newAccountId();
    const path = '/since-creation';
    await db.subscribe(account, receiver.url(path), ['*']);
    const old = envelope(account, 'call.started', { old: true }, { created_at: new Date(Date.now() - 3600_000).toISOString() });
    const fresh = envelope(account, 'call.started', { old: false });
    await log.publishAtOnce([old, fresh]);
    await receiver.waitFor(path, 1, 20_000);
    await sleep(1500);
    expect(receiver.received(path).map((r) => r.body.id)).to.deep.equal([fresh.id]);
  });

  it('a new delivery group starts at the end of the log; DELIVERY_START_FROM=earliest replays it', async () => {
    const topic = `${env.EVENTS_TOPIC}-${uniqueName('fresh')}`;
    const admin = new Kafka({ brokers: env.KAFKA_BROKERS!.split(','), logLevel: logLevel.NOTHING }).admin();
    await admin.connect();
    await admin.createTopics({ topics: [{ topic, numPartitions: 3, replicationFactor: 1 }], waitForLeaders: true });
    await admin.disconnect();
    const freshEnv = { ...env, EVENTS_TOPIC: topic, MONGO_DB: `${env.MONGO_DB}_fresh`, DELIVERY_GROUP_ID: uniqueName('fresh-group'), INSTANCE_ID: uniqueName('dw') };
    const freshDb = new TestDb(freshEnv);
    const freshLog = new TestLog(freshEnv);
    const account = newAccountId();
    const path = '/fresh-group';
    const sub = await freshDb.subscribe(account, receiver.url(path), ['*']);
    // The subscription is older than every event here: only the group's start position decides.
    await freshDb.collection('webhooks').updateOne({ _id: sub._id }, { $set: { created_at: new Date(Date.now() - 24 * 3600_000) } });
    const history = envelope(account, 'call.started', { n: 'history' });
    await freshLog.publish([history]);

    await startTestDelivery(freshEnv);
    await waitForGroup(freshEnv);
    const live = envelope(account, 'call.started', { n: 'live' });
    await freshLog.publish([live]);
    await receiver.waitFor(path, 1, 20_000);
    await sleep(2000);
    expect(receiver.received(path).map((r) => r.body.id), 'a fresh group sends only what came after it started').to.deep.equal([live.id]);

    const replayEnv = { ...freshEnv, DELIVERY_GROUP_ID: uniqueName('replay-group'), INSTANCE_ID: uniqueName('dw'), DELIVERY_START_FROM: 'earliest' };
    await startTestDelivery(replayEnv);
    await receiver.waitFor(path, 2, 20_000);
    await sleep(1500);
    // The replaying group reads the whole log: the history, and the live event again (a
    // successful delivery leaves no record that would stop a replay: docs/decisions.md).
    // Every copy of one event carries the same delivery id.
    const got = receiver.received(path);
    expect(got.map((r) => r.body.id)).to.include(history.id);
    expect(got.slice(1).every((r) => r.body.id === history.id || r.body.id === live.id)).to.equal(true);
    const ids = new Map<string, Set<string>>();
    for (const r of got) ids.set(r.body.id, (ids.get(r.body.id) ?? new Set()).add(String(r.headers['x-service-delivery'])));
    expect([...ids.values()].every((s) => s.size === 1)).to.equal(true);
  });

  it('does not retry a blocked address, a certificate for another name or a 410; retries a 404', async () => {
    const account = newAccountId();
    receiver.on('/perm-gone', () => ({ status: 410 })).on('/perm-404', () => ({ status: 404 }));
    const gone = await db.subscribe(account, receiver.url('/perm-gone'), ['call.started']);
    const mismatch = await db.subscribe(account, receiver.url('/perm-tls', 'not-in-the-certificate.example'), ['call.started']);
    const blocked = await db.subscribe(account, 'https://169.254.169.254/perm-blocked', ['call.started']);
    const retried = await db.subscribe(account, receiver.url('/perm-404'), ['call.started']);
    await log.publish([envelope(account, 'call.started')]);
    // The test schedule retries after 1 s, three times: 4 attempts within ~4 s for a retriable failure.
    await receiver.waitFor('/perm-404', 4, 30_000);
    await sleep(1500);
    const states = async (subId: string) => (await db.collection('deliveries').find({ subscription_id: subId }).toArray()).map((d) => [d.state, d.attempts]);
    const outcomes = async (subId: string) => (await db.attempts(subId)).map((a) => a.outcome);
    expect(await states(gone._id), '410').to.deep.equal([['failed', 1]]);
    expect(await states(mismatch._id), 'TLS name mismatch').to.deep.equal([['failed', 1]]);
    expect(await states(blocked._id), 'blocked address').to.deep.equal([['failed', 1]]);
    expect(await states(retried._id), '404').to.deep.equal([['failed', 4]]);
    expect(await outcomes(mismatch._id)).to.deep.equal(['tls']);
    expect(await outcomes(blocked._id)).to.deep.equal(['blocked_address']);
    expect(receiver.received('/perm-gone')).to.have.length(1);
    expect(receiver.received('/perm-tls')).to.have.length(0);
  });
});
