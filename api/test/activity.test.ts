/**
 * The dashboard's read routes: GET /api/v1/webhooks/{id}/stats and GET
 * /api/v1/events/{id}/deliveries. Known attempts written straight into the
 * collection the delivery process writes (same fields) give exact figures;
 * one case runs a real delivery process against an HTTPS receiver, so the
 * routes are proven on what the delivery process really stores.
 */
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { MongoClient } from 'mongodb';
import { atFileEnd } from '#test-support/cleanup.js';
import { baseTestEnv } from '#test-support/env.js';
import { failTimes, Receiver } from '#test-support/receiver.js';
import { deliveryTestEnv, startTestDelivery, waitForGroup } from '../../delivery/test/support/delivery.js';
import type { RunningDelivery } from '../../delivery/src/worker.js';
import type { RunningApi } from '../src/server.js';
import { ActivityDb, MIN } from './support/activity.js';
import { bearer, createAccount, type TestAccount } from './support/accounts.js';
import { call } from './support/api.js';
import { eventually } from './support/events.js';
import { ResponseChecker } from './support/openapi.js';
import { eventDeliveries, webhookStats } from '../src/features/activity/service.js';
import { webhookApi, webhookTestEnv } from './support/webhooks.js';

const hex = (n: number): string => randomBytes(n).toString('hex');

describe('delivery activity routes (stats, an event\'s deliveries)', function () {
  this.timeout(60_000);
  let api: RunningApi;
  let client: MongoClient;
  let db: ActivityDb;
  let checker: ResponseChecker;

  const get = (acct: TestAccount, path: string, credential = acct.token) => call(api.url, 'GET', path, { headers: bearer(credential) });
  // Not '*' by default: another test file's delivery process may still run, and must not add real attempts here.
  const subscribe = async (acct: TestAccount, url = 'https://127.0.0.1/activity', events = ['message.received']): Promise<string> => {
    const res = await call(api.url, 'POST', '/api/v1/webhooks', { headers: bearer(acct.apiKey), body: { url, events } });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return res.body.id;
  };
  /** Ingests one event for the account and waits until polling shows it (the event routes read the stored log). */
  const storedEvent = async (acct: TestAccount, type = 'call.completed'): Promise<string> => {
    const res = await call(api.url, 'POST', '/internal/v1/events', { headers: bearer(api.deps.config.ingestToken), body: { account_id: acct.userId, type, data: { call_id: 'c-1' } } });
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    const id: string = res.body.events[0].id;
    await eventually(async () => ((await get(acct, `/api/v1/events?type=${type}&limit=500`)).body.events?.some((e: { id: string }) => e.id === id) ? true : undefined), 30_000, 100);
    return id;
  };

  before(async () => {
    ({ api } = await webhookApi());
    client = new MongoClient(baseTestEnv().MONGO_URL!, { retryWrites: false });
    atFileEnd(() => client.close());
    db = new ActivityDb(client.db(webhookTestEnv().MONGO_DB));
    checker = new ResponseChecker((await call(api.url, 'GET', '/api/openapi.json')).body);
  });

  describe('GET /api/v1/webhooks/{id}/stats', () => {
    it('counts known attempts per bucket as succeeded, retrying and failed, with p50/p99 latency, over 1h and 24h', async () => {
      const acct = await createAccount(api.url);
      const id = await subscribe(acct);
      const other = await subscribe(acct, 'https://127.0.0.1/other');
      const now = Date.now();
      const at = (minutesAgo: number): Date => new Date(now - minutesAgo * MIN);
      const base = { subscription: id, account: acct.userId };
      const inHour = [
        await db.attempt({ ...base, at: at(1), outcome: 'ok', status: 200, ms: 100 }),
        await db.attempt({ ...base, at: at(2), outcome: 'ok', status: 204, ms: 300 }),
        await db.attempt({ ...base, at: at(21), outcome: 'ok', status: 200, ms: 200 }),
        await db.attempt({ ...base, at: at(22), outcome: 'http_5xx', status: 503, ms: 4000, retry: true }),
        await db.attempt({ ...base, at: at(50), outcome: 'connect', status: null, ms: 50 }),
      ];
      const inDay = [await db.attempt({ ...base, at: at(180), outcome: 'http_4xx', status: 410, ms: 1000, retry: true }), await db.attempt({ ...base, at: at(600), outcome: 'ok', status: 200, ms: 150 })];
      await db.attempt({ ...base, at: at(25 * 60), outcome: 'ok', status: 200, ms: 10 }); // older than a day: in neither window
      await db.attempt({ subscription: other, account: acct.userId, at: at(3), outcome: 'ok', status: 200, ms: 9999 }); // another subscription

      const hour = await get(acct, `/api/v1/webhooks/${id}/stats?window=1h`);
      expect(hour.status, JSON.stringify(hour.body)).to.equal(200);
      checker.check('GET', '/api/v1/webhooks/{id}/stats', hour.status, hour.body);
      expect(hour.body).to.include({ webhook_id: id, window: '1h', bucket_seconds: 300, truncated: false });
      expect(hour.body.totals).to.deep.equal({ succeeded: 3, retrying: 1, failed: 1, attempts: 5 });
      // Durations 50, 100, 200, 300, 4000: nearest rank p50 = 3rd, p99 = 5th.
      expect(hour.body.latency_ms).to.deep.equal({ p50: 200, p99: 4000 });
      expect(hour.body.buckets).to.have.length(12);
      const from = Date.parse(hour.body.from);
      expect(Date.parse(hour.body.to) - from).to.equal(60 * MIN);
      expect(from % (5 * MIN)).to.equal(0);
      expect(Date.parse(hour.body.to)).to.be.above(now);
      const expected = hour.body.buckets.map((b: { start: string }) => ({ start: b.start, succeeded: 0, failed: 0, retrying: 0 }));
      for (const a of inHour) {
        const bucket = expected[Math.floor((a.at.getTime() - from) / (5 * MIN))];
        bucket[a.outcome === 'ok' ? 'succeeded' : a.next_attempt_at ? 'retrying' : 'failed']++;
      }
      expect(hour.body.buckets).to.deep.equal(expected);

      const day = await get(acct, `/api/v1/webhooks/${id}/stats?window=24h`, acct.apiKey);
      expect(day.status).to.equal(200);
      checker.check('GET', '/api/v1/webhooks/{id}/stats', day.status, day.body);
      expect(day.body).to.include({ window: '24h', bucket_seconds: 3600 });
      expect(day.body.buckets).to.have.length(24);
      expect(day.body.totals).to.deep.equal({ succeeded: 4, retrying: 2, failed: 1, attempts: 7 });
      expect(day.body.buckets.reduce((n: number, b: { succeeded: number; failed: number; retrying: number }) => n + b.succeeded + b.failed + b.retrying, 0)).to.equal(7);
      const dayFrom = Date.parse(day.body.from);
      const at180 = day.body.buckets[Math.floor((inDay[0]!.at.getTime() - dayFrom) / (60 * MIN))];
      expect(at180.retrying).to.be.at.least(1);

      // No window given: the last hour.
      expect((await get(acct, `/api/v1/webhooks/${id}/stats`)).body.totals).to.deep.equal(hour.body.totals);
    });

    it('answers zeros and null latency for a subscription with no attempts', async () => {
      const acct = await createAccount(api.url);
      const id = await subscribe(acct);
      const res = await get(acct, `/api/v1/webhooks/${id}/stats?window=24h`);
      expect(res.status).to.equal(200);
      checker.check('GET', '/api/v1/webhooks/{id}/stats', res.status, res.body);
      expect(res.body.totals).to.deep.equal({ succeeded: 0, retrying: 0, failed: 0, attempts: 0 });
      expect(res.body.latency_ms).to.deep.equal({ p50: null, p99: null });
    });

    it('reads at most the bound of attempts, the most recent, and says it was truncated (bound lowered through the service\'s test hook)', async () => {
      const acct = await createAccount(api.url);
      const id = await subscribe(acct);
      const now = Date.now();
      const base = { subscription: id, account: acct.userId, status: 200, outcome: 'ok' as const };
      await db.attempt({ ...base, at: new Date(now - 40 * MIN), outcome: 'timeout', status: null, ms: 4000 }); // the oldest: left out
      for (const [minutes, ms] of [[30, 10], [20, 20], [10, 30]] as const) await db.attempt({ ...base, at: new Date(now - minutes * MIN), ms });
      const exact = await webhookStats(api.deps, acct.userId, id, '1h', { maxAttempts: 4 });
      expect(exact.truncated).to.equal(false);
      expect(exact.totals).to.deep.equal({ succeeded: 3, retrying: 0, failed: 1, attempts: 4 });
      const cut = await webhookStats(api.deps, acct.userId, id, '1h', { maxAttempts: 3 });
      expect(cut.truncated).to.equal(true);
      expect(cut.totals).to.deep.equal({ succeeded: 3, retrying: 0, failed: 0, attempts: 3 });
      expect(cut.latency_ms).to.deep.equal({ p50: 20, p99: 30 });
      // Through HTTP, with the real bound (10,000), nothing is cut.
      expect((await get(acct, `/api/v1/webhooks/${id}/stats`)).body).to.include({ truncated: false });
    });

    it('refuses a bad window or an unknown parameter (400), an unknown, malformed or other account\'s id (404), no credential (401)', async () => {
      const acct = await createAccount(api.url);
      const stranger = await createAccount(api.url);
      const id = await subscribe(acct);
      for (const query of ['window=2h', 'window=', 'window=1H', 'window=1h&limit=5']) {
        const res = await get(acct, `/api/v1/webhooks/${id}/stats?${query}`);
        expect(res.status, query).to.equal(400);
        expect(res.body.error.code, query).to.equal('validation_failed');
        checker.check('GET', '/api/v1/webhooks/{id}/stats', res.status, res.body);
      }
      expect((await get(acct, `/api/v1/webhooks/${id}/stats?window=2h`)).body.error.details[0].path).to.equal('window');
      for (const path of [`/api/v1/webhooks/wh_${hex(12)}/stats`, '/api/v1/webhooks/wh_nope/stats']) {
        const res = await get(acct, path);
        expect(res.status, path).to.equal(404);
        expect(res.body.error.code).to.equal('not_found');
      }
      const theirs = await get(stranger, `/api/v1/webhooks/${id}/stats?window=1h`);
      expect(theirs.status).to.equal(404);
      checker.check('GET', '/api/v1/webhooks/{id}/stats', theirs.status, theirs.body);
      expect((await call(api.url, 'GET', `/api/v1/webhooks/${id}/stats`)).status).to.equal(401);
    });
  });

  describe('GET /api/v1/events/{id}/deliveries', () => {
    it('shows the event with each delivery and its attempts (status, duration, outcome), oldest first', async () => {
      const acct = await createAccount(api.url);
      const hook = await subscribe(acct, 'https://127.0.0.1/detail');
      const eventId = await storedEvent(acct);
      const t0 = new Date(Date.now() - 5 * MIN);
      const dlv = await db.delivery({ subscription: hook, account: acct.userId, event: eventId, state: 'succeeded', attempts: 2, lastStatus: 200, createdAt: t0 });
      const first = await db.attempt({ subscription: hook, account: acct.userId, event: eventId, delivery: dlv._id, at: new Date(t0.getTime() + 1000), outcome: 'http_5xx', status: 502, ms: 1234, retry: true, attempt: 1 });
      const second = await db.attempt({ subscription: hook, account: acct.userId, event: eventId, delivery: dlv._id, at: new Date(t0.getTime() + MIN), outcome: 'ok', status: 200, ms: 87, attempt: 2 });
      // The same event id in another account's deliveries is not shown (ids are random; this guards the filter).
      await db.delivery({ subscription: `wh_${hex(12)}`, account: 'usr_someoneelse', event: eventId, state: 'failed', attempts: 1, lastStatus: 500, createdAt: t0 });

      const res = await get(acct, `/api/v1/events/${eventId}/deliveries`);
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      checker.check('GET', '/api/v1/events/{id}/deliveries', res.status, res.body);
      expect(res.body.event).to.include({ id: eventId, type: 'call.completed' });
      expect(res.body.event.data).to.deep.equal({ call_id: 'c-1' });
      expect(res.body.truncated).to.equal(false);
      expect(res.body.deliveries).to.have.length(1);
      const [d] = res.body.deliveries;
      expect(d).to.include({ id: dlv._id, webhook_id: hook, url: 'https://127.0.0.1/detail', state: 'succeeded', attempts_made: 2, last_status: 200 });
      expect(d.attempts.map((a: { id: string; attempt: number; status: number; duration_ms: number; outcome: string }) => [a.id, a.attempt, a.status, a.duration_ms, a.outcome])).to.deep.equal([
        [first._id, 1, 502, 1234, 'http_5xx'],
        [second._id, 2, 200, 87, 'ok'],
      ]);
      expect(d.attempts[0].next_attempt_at).to.be.a('string');
      expect(d.attempts[1].next_attempt_at).to.equal(null);

      // An event no subscription matched: no deliveries.
      const none = await storedEvent(acct, 'message.sent');
      const empty = await get(acct, `/api/v1/events/${none}/deliveries`, acct.apiKey);
      expect(empty.status).to.equal(200);
      expect(empty.body.deliveries).to.deep.equal([]);
    });

    it('shows at most the bound of deliveries and attempts, the oldest, and says it was truncated (bounds lowered through the service\'s test hook)', async () => {
      const acct = await createAccount(api.url);
      const [h1, h2] = [await subscribe(acct, 'https://127.0.0.1/b1'), await subscribe(acct, 'https://127.0.0.1/b2')];
      const eventId = await storedEvent(acct);
      const t0 = Date.now() - 10 * MIN;
      const d1 = await db.delivery({ subscription: h1, account: acct.userId, event: eventId, state: 'failed', attempts: 3, lastStatus: 500, createdAt: new Date(t0) });
      await db.delivery({ subscription: h2, account: acct.userId, event: eventId, state: 'pending', attempts: 0, lastStatus: null, createdAt: new Date(t0 + 1000) });
      for (let n = 1; n <= 3; n++) await db.attempt({ subscription: h1, account: acct.userId, event: eventId, delivery: d1._id, at: new Date(t0 + n * MIN), outcome: 'http_5xx', status: 500, ms: n, retry: n < 3, attempt: n });
      const all = await eventDeliveries(api.deps, acct.userId, eventId, { maxDeliveries: 2, maxAttempts: 3 });
      expect(all.truncated).to.equal(false);
      expect(all.deliveries.map((d) => [d.webhook_id, d.attempts.length])).to.deep.equal([[h1, 3], [h2, 0]]);
      const fewer = await eventDeliveries(api.deps, acct.userId, eventId, { maxDeliveries: 1, maxAttempts: 2 });
      expect(fewer.truncated).to.equal(true);
      expect(fewer.deliveries.map((d) => [d.webhook_id, d.attempts.map((a) => a.attempt)])).to.deep.equal([[h1, [1, 2]]]);
    });

    it('refuses an unknown, malformed or other account\'s event (404) and no credential (401)', async () => {
      const acct = await createAccount(api.url);
      const stranger = await createAccount(api.url);
      const eventId = await storedEvent(acct);
      for (const path of [`/api/v1/events/evt_${hex(12)}/deliveries`, '/api/v1/events/evt_x/deliveries', `/api/v1/events/${eventId.toUpperCase()}/deliveries`]) {
        const res = await get(acct, path);
        expect(res.status, path).to.equal(404);
        expect(res.body.error.code).to.equal('not_found');
      }
      const theirs = await get(stranger, `/api/v1/events/${eventId}/deliveries`);
      expect(theirs.status).to.equal(404);
      checker.check('GET', '/api/v1/events/{id}/deliveries', theirs.status, theirs.body);
      expect((await call(api.url, 'GET', `/api/v1/events/${eventId}/deliveries`)).status).to.equal(401);
    });
  });

  describe('on what a real delivery process writes', () => {
    let receiver: Receiver;
    let worker: RunningDelivery;

    before(async function () {
      this.timeout(120_000);
      receiver = await Receiver.start();
      const env = deliveryTestEnv(receiver.caFile, webhookTestEnv());
      worker = await startTestDelivery(env);
      await waitForGroup(env);
    });
    after(async () => {
      await worker?.close();
      await receiver?.close();
    });

    it('a delivery that failed once (500) then succeeded: the event shows both attempts, the stats count 1 retrying and 1 succeeded', async () => {
      const acct = await createAccount(api.url);
      receiver.on('/flaky', failTimes(1, 500));
      const hook = await subscribe(acct, receiver.url('/flaky'), ['call.completed']);
      const eventId = await storedEvent(acct);
      await receiver.waitFor('/flaky', 2, 30_000);
      const detail = await eventually(async () => {
        const res = await get(acct, `/api/v1/events/${eventId}/deliveries`);
        return res.body.deliveries?.[0]?.state === 'succeeded' && res.body.deliveries[0].attempts.length === 2 ? res : undefined;
      }, 30_000, 100);
      checker.check('GET', '/api/v1/events/{id}/deliveries', detail.status, detail.body);
      const [d] = detail.body.deliveries;
      expect(d).to.include({ webhook_id: hook, url: receiver.url('/flaky'), attempts_made: 2, last_status: 200 });
      expect(d.attempts.map((a: { attempt: number; status: number; outcome: string }) => [a.attempt, a.status, a.outcome])).to.deep.equal([
        [1, 500, 'http_5xx'],
        [2, 200, 'ok'],
      ]);
      for (const a of d.attempts) expect(a.duration_ms).to.be.a('number').and.at.least(0);

      const stats = await get(acct, `/api/v1/webhooks/${hook}/stats?window=1h`);
      expect(stats.body.totals).to.deep.equal({ succeeded: 1, retrying: 1, failed: 0, attempts: 2 });
      const durations = d.attempts.map((a: { duration_ms: number }) => a.duration_ms).sort((x: number, y: number) => x - y);
      expect(stats.body.latency_ms).to.deep.equal({ p50: durations[0], p99: durations[1] });
    });
  });
});
