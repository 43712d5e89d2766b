/**
 * Ordered delivery (`ordering: "fifo"`), against real Kafka, the real Mongo
 * server and an HTTPS receiver: one delivery at a time in log order, a
 * failing one holding the ones after it until it succeeds, an unordered
 * subscription of the same account (same partition, same process) not held;
 * and the order kept while a second delivery process joins the group (a
 * rebalance) and then both stop with the backlog and a retry pending and a
 * new one takes over.
 *
 * On its own topic and database: a delivery process of another test file
 * (another group on the shared topic) would send these events too.
 */
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { pino } from 'pino';
import { DueWriteOrder, insertDeliveries, saveFifoHead, sweepFifoSlots } from '#shared/mongo/delivery-queue.js';
import { createMongo, type DeliveryDoc } from '#shared/mongo/index.js';
import { atFileEnd } from '#test-support/cleanup.js';
import { ownDatabase, uniqueName } from '#test-support/env.js';
import { Receiver, type Received, type Reply } from '#test-support/receiver.js';
import type { EventEnvelope } from '#shared/eventlog/types.js';
import { deliveryTestEnv, envelope, newAccountId, startTestDelivery, TestDb, TestLog, waitForGroup } from './support/delivery.js';
import type { RunningDelivery } from '../src/worker.js';
import { loadDeliveryConfig } from '../src/config.js';
import { FifoQueues } from '../src/fifo.js';

/** Answers each request after `delayMs` with `reply(id)`, counting the requests in flight at once. */
function orderedReceiver(receiver: Receiver, path: string, delayMs: number, reply: (eventId: string, nth: number) => number) {
  const seen = new Map<string, number>();
  const state = { inFlight: 0, most: 0 };
  receiver.on(path, (_n, req): Reply => {
    const id = String(req.body.id);
    const nth = (seen.get(id) ?? 0) + 1;
    seen.set(id, nth);
    state.inFlight++;
    state.most = Math.max(state.most, state.inFlight);
    // Scheduled before the receiver's own answer timer: counted out before the answer leaves.
    setTimeout(() => state.inFlight--, delayMs);
    return { status: reply(id, nth), delayMs };
  });
  return state;
}

/** The events' positions, request by request. */
const positions = (reqs: Received[], events: EventEnvelope[]): number[] => reqs.map((r) => events.findIndex((e) => e.id === r.body.id));

describe('ordered delivery (ordering: fifo)', function () {
  this.timeout(90_000);
  let receiver: Receiver;
  let log: TestLog;
  let db: TestDb;
  let env: Record<string, string>;
  let first: RunningDelivery;

  before(async function () {
    this.timeout(90_000);
    receiver = await Receiver.start();
    env = deliveryTestEnv(receiver.caFile, { EVENTS_TOPIC: uniqueName('events-fifo'), MONGO_DB: ownDatabase('fifo') });
    first = await startTestDelivery(env);
    await waitForGroup(env);
    log = new TestLog(env);
    db = new TestDb(env);
  });
  after(() => receiver.close());

  it('sends one at a time in log order, a failing one holding the rest until it succeeds, without holding an unordered subscription', async () => {
    const account = newAccountId();
    await db.subscribe(account, receiver.url('/fifo'), ['*'], { ordering: 'fifo' });
    await db.subscribe(account, receiver.url('/free'), ['*']);
    // Made after the subscriptions (they take only events from their creation on).
    const events = Array.from({ length: 5 }, (_, i) => envelope(account, 'message.sent', { n: i }));
    // The first event's first two attempts fail (retries 1 s apart); everything else succeeds.
    const fifo = orderedReceiver(receiver, '/fifo', 30, (id, nth) => (id === events[0]!.id && nth <= 2 ? 503 : 200));
    await log.publishAtOnce(events);

    const free = await receiver.waitFor('/free', 5);
    const ordered = await receiver.waitFor('/fifo', 7, 30_000);
    expect(positions(ordered, events), 'the first three times, then the rest in log order').to.deep.equal([0, 0, 0, 1, 2, 3, 4]);
    expect(fifo.most, 'requests in flight at once').to.equal(1);
    // Held behind the first one's retries, while the unordered subscription of the same account had all five
    // before the first one's third attempt.
    expect(free[4]!.at).to.be.below(ordered[2]!.at);
    expect(positions(free, events).sort()).to.deep.equal([0, 1, 2, 3, 4]);
  });

  it('keeps the order while a second process joins the group and both stop with the backlog and a retry pending, then a new one starts', async () => {
    const account = newAccountId();
    await db.subscribe(account, receiver.url('/handover'), ['*'], { ordering: 'fifo' });
    const second = await startTestDelivery({ ...env, INSTANCE_ID: uniqueName('dw') });
    await waitForGroup(env);
    const events = Array.from({ length: 8 }, (_, i) => envelope(account, 'call.started', { n: i }));
    // The second event fails once (its retry comes 1 s later); every answer takes 100 ms.
    const state = orderedReceiver(receiver, '/handover', 100, (id, nth) => (id === events[1]!.id && nth === 1 ? 503 : 200));
    await log.publishAtOnce(events);

    // The second event has failed once: the rest wait behind its retry. Now both processes stop,
    // and a new one starts: the queue's place and the retry are in the store only.
    await db.until(async () => receiver.received('/handover').some((r) => r.body.id === events[1]!.id), 20_000, 'the failing attempt');
    await Promise.all([first.close(), second.close()]);
    const stoppedAfter = receiver.received('/handover').length;
    await startTestDelivery({ ...env, INSTANCE_ID: uniqueName('dw') });
    const all = await db.until(
      async () => {
        const reqs = receiver.received('/handover');
        return new Set(reqs.map((r) => r.body.id)).size === events.length && reqs.length >= events.length + 1 ? reqs : null;
      },
      30_000,
      () => `all ${events.length} events (got ${JSON.stringify(positions(receiver.received('/handover'), events))})`,
    );
    const seq = positions(all, events);
    // Never back: a copy sent again (at-least-once) may repeat the last one, never an earlier one.
    for (let k = 1; k < seq.length; k++) expect(seq[k], `request ${k} of ${JSON.stringify(seq)}`).to.be.at.least(seq[k - 1]!);
    expect([...new Set(seq)]).to.deep.equal([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(state.most, 'requests in flight at once').to.equal(1);
    // The second event's retry came before any later event, and the restarted process sent the rest.
    expect(seq.slice(0, 3)).to.deep.equal([0, 1, 1]);
    expect(stoppedAfter, 'requests before the restart').to.be.below(seq.length - 4);
  });

  it('two processes writing a queue\'s first head hint at the same moment both succeed (an upsert that meets the other\'s insert is applied again)', async () => {
    const mongo = createMongo(loadDeliveryConfig({ ...env, MONGO_DB: ownDatabase('fifohints') }));
    atFileEnd(() => mongo.close());
    for (let round = 0; round < 20; round++) {
      const sub = 'wh_' + randomBytes(12).toString('hex');
      const writes = [0, 1, 2, 3].map((i) => saveFifoHead(mongo.collections.retryDue, sub, { n: i, i: 0 }));
      const failed = (await Promise.allSettled(writes)).filter((r) => r.status === 'rejected');
      expect(failed.map((r) => String((r as PromiseRejectedResult).reason)), `round ${round}`).to.deep.equal([]);
      expect(await mongo.collections.retryDue.findOne({ _id: `fifoh:${sub}` })).to.not.equal(null);
    }
  });

  it('two processes stepping one queue at once, from a stale head hint, claim each head once (again only after its lease ran out) and never one behind a pending delivery; the sweep removes only slots behind the head', async () => {
    // A database of its own: no delivery process reads its due buckets (it would step the queue too).
    const mongo = createMongo(loadDeliveryConfig({ ...env, MONGO_DB: ownDatabase('fifosteps') }));
    atFileEnd(() => mongo.close());
    /** The test's own writes (the API appending to the queue): one process. */
    const c = { ...mongo.collections, dueWrites: new DueWriteOrder() };
    const sub = 'wh_' + randomBytes(12).toString('hex');
    const now = new Date();
    const doc = (k: number): DeliveryDoc => ({
      _id: `dlv_fifo_${sub}_${k}`, account_id: 'acct_x', subscription_id: sub, event_id: `evt_${k}`, event_type: 'call.started', body: '{}', state: 'pending', attempts: 0,
      next_attempt_at: now, claim_seq: 0, lease_owner: null, lease_until: null, last_status: null, last_outcome: null, created_at: now, updated_at: now, fifo: true,
    });
    const docs = [0, 1, 2].map(doc);
    const LEASE_MS = 2000;
    await insertDeliveries(c, docs);
    // Two processes: what each hands to its dispatcher (nothing is sent here).
    const handed: string[] = [];
    const process = (owner: string) =>
      new FifoQueues({
        // Each its own due-store write order, as two processes have (their first upserts of the head hint meet).
        log: pino({ level: 'silent' }), collections: { ...mongo.collections, dueWrites: new DueWriteOrder() }, owner, leaseMs: LEASE_MS, clock: () => new Date(),
        dispatcher: { room: 10, holds: () => false, roomFor: () => 10, enqueue: (job) => (handed.push(job.delivery._id), 'queued') },
      });
    const [a, b] = [process('A'), process('B')];
    const finish = (k: number, state: 'succeeded' | 'failed') => c.deliveries.updateOne({ _id: docs[k]!._id }, { $set: { state, lease_owner: null, lease_until: null } });

    await Promise.all([a.step(sub), b.step(sub), a.step(sub), b.step(sub)]);
    expect(handed, 'the head, once').to.deep.equal([docs[0]!._id]);
    // Held (leased) by its claimer: nobody takes it or anything behind it.
    await Promise.all([a.step(sub), b.step(sub)]);
    expect(handed).to.have.length(1);
    // Its claimer dies: once the lease is over, the other process takes the same head (nothing behind it).
    await new Promise((r) => setTimeout(r, LEASE_MS + 100));
    await b.step(sub);
    expect(handed, 'the head again, after its lease').to.deep.equal([docs[0]!._id, docs[0]!._id]);
    handed.shift();
    await finish(0, 'succeeded');
    await Promise.all([a.step(sub), b.step(sub)]);
    expect(handed, 'the next once the first succeeded').to.deep.equal([docs[0]!._id, docs[1]!._id]);
    // Given up counts as finished; a head hint written late from before (a lagging writer) changes nothing.
    await finish(1, 'failed');
    await saveFifoHead(c.retryDue, sub, { n: 0, i: 0 });
    await Promise.all([a.step(sub), b.step(sub)]);
    expect(handed).to.deep.equal(docs.map((d) => d._id));
    // Appended later (a resend, say): after the last one is finished, not before.
    const later = doc(3);
    await insertDeliveries(c, [later]);
    await Promise.all([a.step(sub), b.step(sub)]);
    expect(handed).to.have.length(3);
    await finish(2, 'succeeded');
    await Promise.all([a.step(sub), b.step(sub)]);
    expect(handed).to.deep.equal([...docs.map((d) => d._id), later._id]);

    // The retention sweep removes an old slot only once the head hint is past it (slot 0: the first three;
    // slot 1, the pending fourth, stays); a step from a hint that lags before the removed slot steps over it.
    await c.retryDue.updateMany({ _id: { $in: [`fifo:${sub}:0`, `fifo:${sub}:1`] } }, { $set: { appended_at: new Date(Date.now() - 2 * 86_400_000) } });
    expect(await sweepFifoSlots(c.retryDue, new Date(Date.now() - 86_400_000))).to.equal(1);
    expect((await c.retryDue.find({ _id: { $in: [`fifo:${sub}:0`, `fifo:${sub}:1`] } }).toArray()).map((d) => d._id)).to.deep.equal([`fifo:${sub}:1`]);
    const last = doc(4);
    await insertDeliveries(c, [last]);
    await c.deliveries.updateOne({ _id: later._id }, { $set: { state: 'succeeded', lease_owner: null, lease_until: null } });
    await saveFifoHead(c.retryDue, sub, { n: 0, i: 0 });
    await process('C').step(sub);
    expect(handed).to.deep.equal([...docs.map((d) => d._id), later._id, last._id]);
  });
});
