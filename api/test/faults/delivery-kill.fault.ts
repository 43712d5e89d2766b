/**
 * The delivery process is SIGKILLed three times while it delivers 2,000
 * events to 3 subscriptions (6,000 deliveries) and is restarted each time.
 * Promise: after the last restart every subscription receives every event at
 * least once (correctly signed); duplicates are counted and reported (at-least-
 * once delivery: an attempt sent just before a kill is sent again).
 */
import { expect } from 'chai';
import { verifyServiceSignature } from '#shared/signing.js';
import { Receiver, receiverCaFile } from '#test-support/receiver.js';
import type { TestAccount } from '../support/accounts.js';
import { Cluster, createWebhook, ingestMany, newAccount, until } from './support/cluster.js';
import { recordFigures } from './support/figures.js';
import type { ServiceProcess } from './support/processes.js';

/**
 * 2,000 in the long run (`npm run soak`, FAULTS_FULL=1); 200 inside `npm test`. On
 * the FerretDB test server a delivery's bookkeeping update scans the whole
 * deliveries collection (its SQLite backend pushes down only a filter that is
 * exactly {_id}), so 6,000 deliveries take well over ten minutes there. The
 * promise tested is the same.
 */
const EVENTS = Number(process.env.FAULT_DELIVERY_EVENTS ?? (process.env.FAULTS_FULL === '1' ? 2000 : 200));
const PATHS = ['/sub-1', '/sub-2', '/sub-3'];
/** Generous waits, scaled to the work: FerretDB delivers a few per second under load. */
const DELIVERIES = EVENTS * PATHS.length;
const KILL_WAIT_MS = Math.max(180_000, DELIVERIES * 150);
const FINISH_WAIT_MS = Math.max(300_000, DELIVERIES * 300);
/** Kill when this share of all deliveries has arrived. */
const KILL_AT = [0.1, 0.35, 0.6];

describe('fault: delivery process SIGKILLed 3 times during delivery', function () {
  this.timeout(60_000 + 3 * KILL_WAIT_MS + FINISH_WAIT_MS);
  let cluster: Cluster;
  let api: ServiceProcess;
  let worker: ServiceProcess;
  let receiver: Receiver;
  let account: TestAccount;

  before(async function () {
    receiver = await Receiver.start();
    cluster = await Cluster.create({
      deliveryEnv: {
        WEBHOOK_CA_FILE: await receiverCaFile(),
        WEBHOOK_RETRY_SCHEDULE: '1s,2s,3s,5s,5s,10s,10s,10s',
        // A killed process's deliveries are retaken once its leases run out. Above the
        // dispatcher's renewal margin (9 s), so a fresh delivery is sent without a second claim.
        WEBHOOK_LEASE_MS: '15000',
        // Each poll for due retries scans the deliveries collection on FerretDB: not too often.
        WEBHOOK_POLL_INTERVAL_MS: '1000',
      },
    });
    api = await cluster.addApi('delivery-kill-api');
    worker = cluster.addDelivery('delivery-kill-worker');
    await Promise.all([api.start(), worker.start()]);
    account = await newAccount(api);
  });

  after(async function () {
    await worker?.stop();
    await api?.stop();
    await receiver?.close();
  });

  it('every subscription receives every event at least once; duplicates are counted', async function () {
    const subs = await Promise.all(PATHS.map((path) => createWebhook(api, account.apiKey, receiver.url(path))));
    const ids = await ingestMany(api, account.userId, EVENTS);
    expect(new Set(ids).size).to.equal(EVENTS);
    const total = DELIVERIES;

    const kills: { at_received: number; restart_ms: number }[] = [];
    for (const share of KILL_AT) {
      await until(`${Math.round(share * 100)} % of the deliveries`, () => receiver.received().length >= share * total, KILL_WAIT_MS, 50);
      const at = receiver.received().length;
      await worker.kill();
      const killed = Date.now();
      await worker.start();
      kills.push({ at_received: at, restart_ms: Date.now() - killed });
      console.log(`      SIGKILLed the delivery process at ${at}/${total} deliveries received; restarted`);
    }
    const lastRestart = Date.now();
    const progress = setInterval(() => console.log(`      ${receiver.received().length}/${total} requests received`), 30_000);

    const missing = (): Map<string, string[]> => {
      const out = new Map<string, string[]>();
      for (const path of PATHS) {
        const got = new Set(receiver.received(path).map((r) => r.body?.id as string));
        out.set(
          path,
          ids.filter((id) => !got.has(id)),
        );
      }
      return out;
    };
    try {
      await until('every subscription has every event', () => [...missing().values()].every((m) => m.length === 0), FINISH_WAIT_MS, 500);
    } finally {
      clearInterval(progress);
    }
    const completeMs = Date.now() - lastRestart;

    const perSubscription = PATHS.map((path, i) => {
      const got = receiver.received(path);
      const counts = new Map<string, number>();
      for (const r of got) counts.set(r.body.id, (counts.get(r.body.id) ?? 0) + 1);
      const badSignatures = got.filter((r) => !verifyServiceSignature(subs[i]!.secret, r.raw, r.headers['x-service-signature'] as string | undefined)).length;
      const deliveryIds = new Set(got.map((r) => r.headers['x-service-delivery']));
      return {
        subscription: path,
        received: got.length,
        distinct_events: counts.size,
        duplicates: got.length - counts.size,
        events_received_twice_or_more: [...counts.values()].filter((n) => n > 1).length,
        distinct_delivery_ids: deliveryIds.size,
        bad_signatures: badSignatures,
      };
    });
    const duplicates = perSubscription.reduce((n, s) => n + s.duplicates, 0);
    recordFigures('delivery-sigkilled-3x', {
      events: EVENTS,
      subscriptions: PATHS.length,
      deliveries_expected: total,
      requests_received: receiver.received().length,
      duplicates,
      duplicate_rate: Number((duplicates / total).toFixed(4)),
      kills,
      all_delivered_ms_after_last_restart: completeMs,
      per_subscription: perSubscription,
    });
    for (const s of perSubscription) {
      expect(s.distinct_events, `${s.subscription}: distinct events`).to.equal(EVENTS);
      expect(s.bad_signatures, `${s.subscription}: deliveries with a bad signature`).to.equal(0);
      // One delivery (one X-Service-Delivery id) per event and subscription, however often it was sent.
      expect(s.distinct_delivery_ids, `${s.subscription}: delivery ids`).to.equal(EVENTS);
    }
    expect(receiver.received().filter((r) => !PATHS.includes(r.path)).length, 'requests to other paths').to.equal(0);
    expect(cluster.crashes(), 'processes that exited unasked').to.deep.equal([]);
  });
});
