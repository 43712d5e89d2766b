/**
 * Subscriptions of different accounts that point at the same receiver origin
 * (one SaaS host, different paths) share no connections: receivers that hang
 * for some of them hold up only those. A healthy attempt never waits behind a
 * hung one's connection, and the time it waits for its own is not charged to
 * its 4 s or to its subscription's health (no `timeout` recorded, its
 * concurrency not cut).
 */
import { expect } from 'chai';
import { hang, Receiver } from '#test-support/receiver.js';
import { uniqueName } from '#test-support/env.js';
import { deliveryTestEnv, envelope, newAccountId, startTestDelivery, TestDb, TestLog, waitForGroup } from './support/delivery.js';

describe('delivery: subscriptions on one receiver origin', function () {
  let receiver: Receiver;
  before(async () => {
    receiver = await Receiver.start();
  });
  after(() => receiver.close());

  it('10 subscriptions on one origin, 2 hanging: every healthy delivery arrives on its first attempt, none recorded as timeout', async function () {
    this.timeout(90_000);
    const SUBS = 10;
    const HUNG = 2;
    const EVENTS = 10;
    const base = deliveryTestEnv(receiver.caFile);
    // Few connections, so that the hung subscriptions' first attempts alone could take all of
    // an origin's connections were they shared (each starts with 4 attempts in flight).
    const env = deliveryTestEnv(receiver.caFile, {
      EVENTS_TOPIC: `${base.EVENTS_TOPIC}-${uniqueName('origin')}`,
      MONGO_DB: `${base.MONGO_DB}_origin`,
      WEBHOOK_SOCKETS_PER_ORIGIN: '4',
      WEBHOOK_CONCURRENCY_PER_SUBSCRIPTION: '8',
    });
    const worker = await startTestDelivery(env);
    await waitForGroup(env);
    const db = new TestDb(env);
    const log = new TestLog(env);
    const accounts = Array.from({ length: SUBS }, () => newAccountId());
    const paths = accounts.map((_, i) => (i < HUNG ? `/hung-${i}` : `/healthy-${i}`));
    for (const path of paths.slice(0, HUNG)) receiver.on(path, hang);
    // Same origin (https://127.0.0.1:<port>), one subscription per account.
    const subs = await Promise.all(accounts.map((account, i) => db.subscribe(account, receiver.url(paths[i]!), ['*'])));
    const healthyIds = subs.slice(HUNG).map((s) => s._id);

    // The hung subscriptions first: their requests are on the receiver (holding connections) before any healthy one is sent.
    await log.publishAtOnce(accounts.slice(0, HUNG).flatMap((account) => Array.from({ length: EVENTS }, (_, n) => envelope(account, 'call.started', { n }))));
    const hungRequests = (): number => paths.slice(0, HUNG).reduce((n, p) => n + receiver.received(p).length, 0);
    await db.until(async () => hungRequests() >= 4, 20_000, 'the hung receivers to hold requests');
    await log.publishAtOnce(accounts.slice(HUNG).flatMap((account) => Array.from({ length: EVENTS }, (_, n) => envelope(account, 'message.sent', { n }))));

    const healthyPaths = paths.slice(HUNG);
    const arrived = (): number => healthyPaths.reduce((n, p) => n + new Set(receiver.received(p).map((r) => r.body.id)).size, 0);
    const total = healthyPaths.length * EVENTS;
    await db.until(async () => arrived() >= total, 60_000, () => `all ${total} healthy deliveries (${arrived()} arrived)`);
    // Their records written: one attempt per healthy delivery.
    const attempts = (): Promise<{ outcome: string }[]> => db.collection('delivery_attempts').find({ subscription_id: { $in: healthyIds } }).toArray();
    await db.until(async () => (await attempts()).length >= total, 20_000, 'the healthy attempts recorded');

    const outcomes: Record<string, number> = {};
    for (const a of await attempts()) outcomes[a.outcome] = (outcomes[a.outcome] ?? 0) + 1;
    expect(outcomes, 'healthy attempts by outcome: each delivered on its first attempt').to.deep.equal({ ok: total });
    for (const path of healthyPaths) expect(receiver.received(path), path).to.have.length(EVENTS);
    for (const id of healthyIds) expect(worker.dispatcher.isSlowed(id), `${id}'s concurrency cut`).to.equal(false);
    // The hung ones are charged for their own hang, and only they.
    const hungIds = subs.slice(0, HUNG).map((s) => s._id);
    const hungOutcomes = await db.until(async () => {
      const found = await db.collection('delivery_attempts').distinct('outcome', { subscription_id: { $in: hungIds } });
      return found.length > 0 && found;
    }, 20_000, 'the hung attempts recorded');
    expect(hungOutcomes).to.deep.equal(['timeout']);
  });
});
