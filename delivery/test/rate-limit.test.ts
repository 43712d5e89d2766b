/**
 * A subscription's `rate_limit`, against real Kafka, the real Mongo server
 * and an HTTPS receiver: its deliveries arrive in order and no faster than
 * the limit, while an unlimited subscription of the same account (same
 * partition, same process) gets its own at once. Bounds are generous: 20
 * deliveries at 5/s take about 3.8 s, unlimited they take well under one.
 *
 * On its own topic and database: a delivery process of another test file
 * (another group on the shared topic) would send these events too.
 */
import { expect } from 'chai';
import { ownDatabase, uniqueName } from '#test-support/env.js';
import { Receiver, type Received } from '#test-support/receiver.js';
import { deliveryTestEnv, envelope, newAccountId, startTestDelivery, TestDb, TestLog, waitForGroup } from './support/delivery.js';

/** The most requests seen within any window of `ms`. */
function busiest(reqs: Received[], ms: number): number {
  let most = 0;
  for (let i = 0; i < reqs.length; i++) {
    let n = 0;
    for (let j = i; j < reqs.length && reqs[j]!.at - reqs[i]!.at < ms; j++) n++;
    most = Math.max(most, n);
  }
  return most;
}

describe('per-subscription rate limit', function () {
  this.timeout(90_000);
  let receiver: Receiver;
  let log: TestLog;
  let db: TestDb;

  before(async function () {
    this.timeout(90_000);
    receiver = await Receiver.start();
    const env = deliveryTestEnv(receiver.caFile, { EVENTS_TOPIC: uniqueName('events-ratelimit'), MONGO_DB: ownDatabase('ratelimit') });
    await startTestDelivery(env);
    await waitForGroup(env);
    log = new TestLog(env);
    db = new TestDb(env);
  });
  after(() => receiver.close());

  it('sends a limited subscription its deliveries in order at no more than its rate, without holding back an unlimited one', async () => {
    const account = newAccountId();
    const limited = await db.subscribe(account, receiver.url('/limited'), ['*']);
    await db.change(limited._id, { rate_limit: 5 });
    await db.subscribe(account, receiver.url('/free'), ['*']);
    const events = Array.from({ length: 20 }, (_, i) => envelope(account, 'message.sent', { n: i }));
    await log.publishAtOnce(events);

    const free = await receiver.waitFor('/free', 20);
    const slow = await receiver.waitFor('/limited', 20, 30_000);
    expect(slow.map((r) => r.body.id), 'in the order of the log').to.deep.equal(events.map((e) => e.id));
    // 5/s: 19 gaps of 200 ms. Unlimited, the same 20 arrive in well under a second.
    expect(slow[19]!.at - slow[0]!.at).to.be.at.least(3000);
    expect(busiest(slow, 1000), 'most deliveries within any second').to.be.at.most(8);
    // The unlimited subscription's 20 were all there before the limited one had half of its own.
    expect(free[19]!.at).to.be.below(slow[9]!.at);
    expect(free[19]!.at - free[0]!.at).to.be.below(3000);
  });

  it('limits retries too, with a limit set after the first attempts (learnt by the pre-send read)', async () => {
    const account = newAccountId();
    const tried = new Set<string>();
    // Every delivery's first attempt fails at once; its retry (1 s later) succeeds.
    receiver.on('/retried', (_n, req) => {
      const id = String(req.headers['x-service-delivery']);
      if (tried.has(id)) return { status: 200 };
      tried.add(id);
      return { status: 503 };
    });
    const sub = await db.subscribe(account, receiver.url('/retried'), ['*']);
    await log.publishAtOnce(Array.from({ length: 10 }, () => envelope(account, 'message.received')));
    await receiver.waitFor('/retried', 10);
    await db.change(sub._id, { rate_limit: 4 });
    const all = await receiver.waitFor('/retried', 20, 30_000);
    const retries = all.slice(10);
    // Unlimited, the 10 retries come within the schedule's jitter (±20 % of 1 s); at 4/s, 9 gaps of 250 ms.
    expect(retries[9]!.at - retries[0]!.at).to.be.at.least(1500);
  });

  it('applies a changed limit from the next send (the pre-send read), and none once it is null', async () => {
    const account = newAccountId();
    const sub = await db.subscribe(account, receiver.url('/changed'), ['*']);
    await db.change(sub._id, { rate_limit: 2 });
    const first = Array.from({ length: 6 }, () => envelope(account, 'call.started'));
    await log.publishAtOnce(first);
    const limitedRun = await receiver.waitFor('/changed', 6, 30_000);
    // 2/s: 5 gaps of 500 ms.
    expect(limitedRun[5]!.at - limitedRun[0]!.at).to.be.at.least(2000);
    await db.change(sub._id, { rate_limit: null });
    const second = Array.from({ length: 10 }, () => envelope(account, 'call.ended'));
    await log.publishAtOnce(second);
    const all = await receiver.waitFor('/changed', 16, 30_000);
    const unlimitedRun = all.slice(6);
    // The first may still wait for its token under the old limit; the rest follow at once.
    expect(unlimitedRun[9]!.at - unlimitedRun[1]!.at).to.be.below(2000);
  });
});
