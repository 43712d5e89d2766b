/**
 * The read right before a send, against the real Mongo server and a real
 * HTTPS receiver, through a dispatcher as the delivery process runs it:
 * - the subscription table answers a send only when it lets it go ahead (a
 *   load a few hundred ms old may predate a create or re-enable that the
 *   consumer's matching already found in the store): a subscription missing
 *   from it, or disabled in it, is read from the store, never taken as
 *   deleted or disabled;
 * - a re-enabled subscription gets nothing that occurred before its
 *   `enabled_at`: a delivery still queued, waiting for a retry, or connecting
 *   across the disable and the enable is given up unsent.
 */
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { pino } from 'pino';
import type { DeliveryDoc, WebhookDoc } from '#shared/mongo/index.js';
import { createMongo, ensureIndexes, type Mongo } from '#shared/mongo/index.js';
import { deliveryId, DueWriteOrder, insertDeliveries } from '#shared/mongo/delivery-queue.js';
import { SecretBox } from '#shared/secrets.js';
import { Receiver } from '#test-support/receiver.js';
import { atFileEnd } from '#test-support/cleanup.js';
import { loadDeliveryConfig } from '../src/config.js';
import { claim, type DeliveryCollections } from '../src/deliveries.js';
import { Dispatcher } from '../src/dispatch.js';
import { logJob, storeJob } from '../src/jobs.js';
import { createSender } from '../src/http-sender.js';
import { SubscriptionTable } from '../src/subscription-table.js';
import { deliveryTestEnv, newAccountId, TestDb } from './support/delivery.js';

const silent = pino({ level: 'silent' });
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('the read before a send: table answers and re-enabled subscriptions', function () {
  this.timeout(60_000);
  let receiver: Receiver;
  let env: Record<string, string>;
  let mongo: Mongo;
  /** The store as this file's writers use it: one process (one write order into the due store). */
  let own: DeliveryCollections;
  let db: TestDb;
  /** Host names whose lookup waits until the test releases it (a send connecting). */
  const heldLookups = new Map<string, { reached: () => void; release: Promise<void> }>();

  before(async () => {
    receiver = await Receiver.start();
    env = deliveryTestEnv(receiver.caFile, { MONGO_DB: `${deliveryTestEnv('x').MONGO_DB}_subchanges` });
    mongo = createMongo(loadDeliveryConfig(env));
    own = { ...mongo.collections, dueWrites: new DueWriteOrder() };
    atFileEnd(() => mongo.close());
    await ensureIndexes(mongo, silent);
    db = new TestDb(env);
  });
  after(() => receiver.close());

  function holdLookup(host: string): { reached: Promise<void>; release: () => void } {
    let reached!: () => void;
    let release!: () => void;
    const r = new Promise<void>((res) => (reached = res));
    heldLookups.set(host, { reached: () => reached(), release: new Promise<void>((res) => (release = res)) });
    return { reached: r, release: () => release() };
  }

  /** A dispatcher as one delivery process runs it, with `table` (if any) for its pre-send reads. */
  function dispatcher(owner: string, table?: SubscriptionTable): Dispatcher {
    const cfg = loadDeliveryConfig(env).webhooks;
    const sender = createSender({
      policy: { allowPrivate: true },
      resolve: async (host: string) => {
        const held = heldLookups.get(host);
        if (held) {
          heldLookups.delete(host);
          held.reached();
          await held.release;
        }
        return ['127.0.0.1'];
      },
      caPem: readFileSync(receiver.caFile, 'utf8'),
      timeoutMs: 4000,
      userAgent: 't',
    });
    const d = new Dispatcher(
      { log: silent, collections: own, sender, box: new SecretBox(cfg.secretKey), owner, leaseMs: cfg.leaseMs, retrySchedule: cfg.retrySchedule, clock: () => new Date(), table },
      { concurrency: 8, perSubscription: 8 },
    );
    atFileEnd(async () => {
      await d.stop(5000);
      sender.close();
    });
    return d;
  }

  /** A table whose latest load (started just now, so fresh for sends) held `docs`. */
  async function tableOf(docs: WebhookDoc[]): Promise<SubscriptionTable> {
    const table = new SubscriptionTable({ loadAll: async () => docs });
    await table.load();
    return table;
  }

  /** A delivery of an event that occurred at `at`, as the consumer builds it (or, `stored`, as the retry store holds it). */
  function delivery(sub: WebhookDoc, at: Date, stored = false): DeliveryDoc {
    const eventId = 'evt_' + Math.random().toString(16).slice(2);
    const now = new Date();
    return {
      _id: deliveryId(eventId, sub._id),
      account_id: sub.account_id,
      subscription_id: sub._id,
      event_id: eventId,
      event_type: 'call.started',
      body: JSON.stringify({ id: eventId, type: 'call.started', created_at: at.toISOString(), data: {}, cursor: 'c' }),
      state: 'pending',
      attempts: stored ? 1 : 0,
      next_attempt_at: now,
      claim_seq: stored ? 0 : 1,
      lease_owner: null,
      lease_until: null,
      last_status: stored ? 500 : null,
      last_outcome: stored ? 'http_error' : null,
      created_at: now,
      updated_at: now,
    };
  }

  /** Hands a fresh delivery to the dispatcher; resolves once it is finished (sent and recorded, or dropped). */
  function sendFresh(d: Dispatcher, doc: DeliveryDoc): Promise<void> {
    return new Promise<void>((done) => expect(d.enqueue(logJob(doc, done))).to.equal('queued'));
  }

  it('sends to a subscription missing from a table load that started before it was stored (read from the store, not taken as deleted)', async () => {
    const path = '/table-new';
    const sub = await db.subscribe(newAccountId(), receiver.url(path), ['*']);
    // The table's latest load started before the create was stored: the subscription is not in it.
    const d = dispatcher('proc-new', await tableOf([]));
    await sendFresh(d, delivery(sub, new Date()));
    expect(receiver.received(path), 'the event matched by a store query is sent').to.have.length(1);
  });

  it('sends to a re-enabled subscription that a table load from before the re-enable holds disabled', async () => {
    const path = '/table-reenabled';
    const sub = await db.subscribe(newAccountId(), receiver.url(path), ['*']);
    await db.change(sub._id, { enabled: false });
    const stale = await tableOf([{ ...sub, enabled: false }]);
    const enabledAt = await db.reenable(sub._id);
    // The table load is still fresh for sends (the test loads it again, as from before the re-enable).
    await stale.load();
    const d = dispatcher('proc-reenabled', stale);
    await sendFresh(d, delivery(sub, new Date(enabledAt.getTime() + 1)));
    expect(receiver.received(path), 'the event after enabled_at is sent').to.have.length(1);
  });

  it('gives up unsent (subscription_disabled) a retry of an event from before a disable and re-enable', async () => {
    const path = '/reenabled-retry';
    const sub = await db.subscribe(newAccountId(), receiver.url(path), ['*']);
    // Its first attempt failed while enabled; the retry is due only after the re-enable.
    const retry = delivery(sub, new Date(), true);
    await insertDeliveries(own, [retry]);
    await db.change(sub._id, { enabled: false });
    await db.reenable(sub._id);
    const current = (await mongo.collections.webhooks.findOne({ _id: sub._id }))!;
    const d = dispatcher('proc-retry', await tableOf([current]));
    const held = await claim(own, retry, 'proc-retry', new Date(), 15_000);
    expect(held).to.not.equal(null);
    expect(d.enqueue(storeJob(held!))).to.equal('queued');
    const doc = await db.until(async () => {
      const x = await mongo.collections.deliveries.findOne({ _id: retry._id });
      return x?.state !== 'pending' && x;
    }, 10_000, 'the retry to be given up');
    expect(doc).to.include({ state: 'failed', last_outcome: 'subscription_disabled' });
    expect(receiver.received(path), 'requests of the event from before the re-enable').to.have.length(0);
  });

  it('sends nothing of a fresh delivery still queued across a disable and re-enable, and the events after it', async () => {
    const path = '/reenabled-queued';
    const sub = await db.subscribe(newAccountId(), receiver.url(path), ['*']);
    const old = delivery(sub, new Date());
    await db.change(sub._id, { enabled: false });
    const enabledAt = await db.reenable(sub._id);
    // Its turn comes now (from the store's read: no table).
    const d = dispatcher('proc-queued');
    await sendFresh(d, old);
    const later = delivery(sub, new Date(enabledAt.getTime() + 1));
    await sendFresh(d, later);
    expect(receiver.received(path).map((r) => r.headers['x-service-delivery']), 'only the event after enabled_at').to.deep.equal([later._id]);
  });

  it('writes no request of an event from before a disable and re-enable, though the send read the subscription before them and was still connecting', async () => {
    const host = 'reenable-connecting.webhooks.test';
    const path = '/reenabled-connecting';
    const sub = await db.subscribe(newAccountId(), receiver.url(path, host), ['*']);
    const d = dispatcher('proc-connecting');
    const held = holdLookup(host);
    const finished = sendFresh(d, delivery(sub, new Date()));
    // The send read the subscription (enabled) and waits for DNS: disable, then re-enable, as the API does.
    await held.reached;
    await db.change(sub._id, { enabled: false });
    await db.reenable(sub._id);
    held.release();
    await finished;
    await sleep(200);
    expect(receiver.received(path), 'requests written after the re-enable').to.have.length(0);
  });
});
