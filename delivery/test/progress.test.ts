/**
 * Duplicates after a restart: a slow subscription holds its
 * partition's committed offset back, so everything read above it is read
 * again by the next owner. What the partition's other subscriptions finished
 * above the commit is listed in the partition's progress document, and the
 * next owner does not send it again; what was not finished (sent, record not
 * written) is sent again: at-least-once.
 *
 * The slow subscription is forced with the dispatcher's test hook: its
 * attempts are sent but their records never written (as when the process
 * dies between a send and its record), so its first deliveries stay
 * unfinished and the commit stays below every event of the test. The first
 * process is then stopped: its state in Kafka and the store is what a kill
 * leaves (commit held, progress written as deliveries finished).
 */
import { expect } from 'chai';
import { Receiver } from '#test-support/receiver.js';
import { uniqueName } from '#test-support/env.js';
import { atFileEnd } from '#test-support/cleanup.js';
import { loadDeliveryConfig } from '../src/config.js';
import { startDelivery } from '../src/worker.js';
import { deliveryTestEnv, envelope, newAccountId, startTestDelivery, TestDb, TestLog, waitForGroup } from './support/delivery.js';

describe('delivery progress above the committed offset', function () {
  this.timeout(120_000);
  let receiver: Receiver;

  before(async () => {
    receiver = await Receiver.start();
  });
  after(() => receiver.close());

  it("after a restart, does not send again what a fast subscription finished while a slow one held the partition's commit", async () => {
    const base = deliveryTestEnv(receiver.caFile);
    const env = deliveryTestEnv(receiver.caFile, { EVENTS_TOPIC: `${base.EVENTS_TOPIC}-progress`, MONGO_DB: `${base.MONGO_DB}_progress` });
    const db = new TestDb(env);
    const log = new TestLog(env);
    const account = newAccountId();
    const slow = await db.subscribe(account, receiver.url('/progress-slow'), ['*']);
    await db.subscribe(account, receiver.url('/progress-fast'), ['*']);

    // The slow subscription's records are never written in the first process.
    const first = await startDelivery(loadDeliveryConfig({ ...env, INSTANCE_ID: uniqueName('progress-1') }), {
      hooks: { beforeRecord: (a) => (a.delivery.subscription_id === slow._id ? new Promise<void>(() => undefined) : Promise.resolve()) },
    });
    atFileEnd(() => first.close());
    await waitForGroup(env);
    const events = [...Array(20).keys()].map((n) => envelope(account, 'message.sent', { n }));
    await log.publishAtOnce(events);
    await receiver.waitFor('/progress-fast', events.length, 60_000);
    await receiver.waitFor('/progress-slow', 1, 60_000);
    const heldSlow = new Set(receiver.received('/progress-slow').map((r) => r.body.id as string));
    // Every fast attempt is recorded (finished) before the first process goes.
    const fastId = (await db.collection('webhooks').findOne({ url: receiver.url('/progress-fast') }))._id as string;
    await db.until(async () => (await db.attempts(fastId)).length >= events.length, 30_000, 'fast attempts recorded');
    await first.close();
    // The fast deliveries that succeeded (on a loaded machine an attempt may time out
    // although the receiver got it: that one is retried, rightly).
    const succeeded = new Set((await db.attempts(fastId)).filter((a) => a.outcome === 'ok').map((a) => a.event_id as string));
    expect(succeeded.size, 'fast deliveries that succeeded before the restart').to.be.above(0);
    const fastBefore = receiver.received('/progress-fast').length;

    const second = await startTestDelivery({ ...env, INSTANCE_ID: uniqueName('progress-2') });
    await waitForGroup(env);
    // Every event reaches the slow subscription, and every slow delivery whose record was
    // never written is sent again (at-least-once; one the first process had taken from the
    // retry store comes back once its lease has run out).
    const copies = (id: string): number => receiver.received('/progress-slow').filter((r) => r.body.id === id).length;
    await db.until(async () => events.every((e) => copies(e.id) > 0) && [...heldSlow].every((id) => copies(id) >= 2), 60_000, 'every event at the slow subscription, the unrecorded ones again');
    // A last event: the fast subscription's queue is served in order, so once this one is
    // there, any copy of the earlier ones read again would be there too.
    const marker = envelope(account, 'message.sent', { marker: true });
    await log.publishAtOnce([marker]);
    await db.until(async () => receiver.received('/progress-fast').some((r) => r.body.id === marker.id), 60_000, 'the marker at the fast subscription');

    const after = receiver.received('/progress-fast').slice(fastBefore).map((r) => r.body.id as string);
    expect(after.filter((id) => succeeded.has(id)), 'finished fast deliveries sent again after the restart').to.deep.equal([]);
    expect(after).to.include(marker.id);
    await second.close();
  });
});
