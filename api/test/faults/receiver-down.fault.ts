/**
 * A subscriber's receiver is down (nothing listens on its port) when events
 * arrive and comes up only later. Promise: once it is back it receives every
 * event (retries on the schedule, shortened here by configuration), and while
 * it is down another subscription of the same account is served as usual.
 */
import { expect } from 'chai';
import { call } from '../support/api.js';
import { Receiver, receiverCaFile } from '#test-support/receiver.js';
import type { TestAccount } from '../support/accounts.js';
import { apiUrl, Cluster, createWebhook, ingestMany, newAccount, until } from './support/cluster.js';
import { recordFigures } from './support/figures.js';
import { freePort, type ServiceProcess } from './support/processes.js';

const FULL = process.env.FAULTS_FULL === '1';
const EVENTS = 50;
/** "Down for the first minutes": 3 minutes in the long run, 20 s inside npm test. */
const DOWN_MS = FULL ? 180_000 : 20_000;
/** The production schedule (5 s, 30 s, 2 min, ...) shortened, as a test config may. */
const SCHEDULE = FULL ? '5s,10s,20s,40s,60s,60s,60s,60s' : '1s,2s,4s,8s,10s,10s,10s';

describe('fault: a receiver down for the first part of the run', function () {
  this.timeout(DOWN_MS + 240_000);
  let cluster: Cluster;
  let api: ServiceProcess;
  let worker: ServiceProcess;
  let healthy: Receiver;
  let late: Receiver | null = null;
  let account: TestAccount;

  before(async function () {
    healthy = await Receiver.start();
    cluster = await Cluster.create({
      deliveryEnv: { WEBHOOK_CA_FILE: await receiverCaFile(), WEBHOOK_RETRY_SCHEDULE: SCHEDULE, WEBHOOK_POLL_INTERVAL_MS: '500' },
    });
    api = await cluster.addApi('receiver-down-api');
    worker = cluster.addDelivery('receiver-down-worker');
    await Promise.all([api.start(), worker.start()]);
    account = await newAccount(api);
  });

  after(async function () {
    await worker?.stop();
    await api?.stop();
    await healthy?.close();
    await late?.close();
  });

  it('receives every event after it comes back; the other subscription is served meanwhile', async function () {
    const port = await freePort(); // nothing listens there yet
    const down = await createWebhook(api, account.apiKey, `https://127.0.0.1:${port}/late`);
    await createWebhook(api, account.apiKey, healthy.url('/healthy'));
    const ids = await ingestMany(api, account.userId, EVENTS, 25);
    const sent = Date.now();

    await healthy.waitFor('/healthy', EVENTS, 60_000);
    const healthyMs = Date.now() - sent;
    const sub = await call(apiUrl(api), 'GET', `/api/v1/webhooks/${down.id}`, { headers: { authorization: `Bearer ${account.apiKey}` } });
    expect(sub.body.last_status, 'no status from a receiver that is down').to.equal(null);
    expect(sub.body.last_error, 'the failed attempts are recorded').to.equal('connect');

    const wait = sent + DOWN_MS - Date.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    const attemptsWhileDown = await call(apiUrl(api), 'GET', `/api/v1/webhooks/${down.id}/deliveries?limit=200`, { headers: { authorization: `Bearer ${account.apiKey}` } });
    expect(attemptsWhileDown.status).to.equal(200);
    const failed = attemptsWhileDown.body.attempts as { outcome: string; next_attempt_at: string | null }[];
    expect(failed.length, 'attempts made while down').to.be.at.least(EVENTS);
    expect(failed.every((a) => a.outcome === 'connect'), 'every attempt while down failed to connect').to.equal(true);
    expect(failed.every((a) => a.next_attempt_at !== null), 'and none was given up').to.equal(true);
    late = await Receiver.start({ port });
    const up = Date.now();
    console.log(`      receiver came up after ${Math.round((up - sent) / 1000)} s`);

    await until('every event at the late receiver', () => new Set(late!.received('/late').map((r) => r.body.id)).size === EVENTS || undefined, 180_000, 250);
    const afterUpMs = Date.now() - up;
    const got = late.received('/late');
    const distinct = new Set(got.map((r) => r.body.id));
    const after = await call(apiUrl(api), 'GET', `/api/v1/webhooks/${down.id}`, { headers: { authorization: `Bearer ${account.apiKey}` } });
    recordFigures('receiver-down-then-back', {
      events: EVENTS,
      down_seconds: DOWN_MS / 1000,
      retry_schedule: SCHEDULE,
      failed_attempts_listed_while_down: failed.length, // the list shows at most 200
      healthy_subscription_all_delivered_ms: healthyMs,
      late_receiver_all_delivered_ms_after_up: afterUpMs,
      late_received: got.length,
      late_distinct_events: distinct.size,
      late_duplicates: got.length - distinct.size,
    });
    expect([...distinct].sort()).to.deep.equal([...ids].sort());
    expect(after.body.last_status, 'last_status once delivered').to.equal(200);
    expect(healthy.received('/healthy').length, 'the healthy receiver got each event once').to.equal(EVENTS);
    expect(cluster.crashes(), 'processes that exited unasked').to.deep.equal([]);
  });
});
