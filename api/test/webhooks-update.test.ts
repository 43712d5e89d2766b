/**
 * PATCH /api/v1/webhooks/{id}: each field, validation naming the field, the
 * creation URL checks, ownership; and end to end with a real delivery
 * process and an HTTPS receiver: a disabled subscription gets nothing for
 * events after the PATCH (and its retrying deliveries are given up), a
 * re-enabled one gets events again, new events/url lists take effect.
 */
import { expect } from 'chai';
import { MongoClient } from 'mongodb';
import { atFileEnd } from '#test-support/cleanup.js';
import { baseTestEnv } from '#test-support/env.js';
import { Receiver, status } from '#test-support/receiver.js';
import { deliveryId, DueWriteOrder } from '#shared/mongo/delivery-queue.js';
import { AttemptRecorder } from '../../delivery/src/recorder.js';
import type { DeliveryDoc } from '#shared/mongo/index.js';
import { deliveryTestEnv, startTestDelivery, waitForGroup } from '../../delivery/test/support/delivery.js';
import type { RunningApi } from '../src/server.js';
import { bearer, createAccount, type TestAccount } from './support/accounts.js';
import { call, sharedApis } from './support/api.js';
import { webhookApi, webhookTestEnv } from './support/webhooks.js';

const WEBHOOK_KEYS = ['id', 'url', 'events', 'description', 'enabled', 'disabled_reason', 'disabled_at', 'rate_limit', 'ordering', 'headers', 'created_at', 'last_status', 'last_delivery_at', 'last_error'];

describe('PATCH /api/v1/webhooks/{id}', () => {
  let api: RunningApi;
  let strict: RunningApi;
  let db: MongoClient;

  const hooks = (acct: TestAccount, method: string, path = '', body?: unknown, on = api) =>
    call(on.url, method, `/api/v1/webhooks${path}`, { headers: bearer(acct.apiKey), body });

  before(async () => {
    ({ api } = await webhookApi());
    [strict] = await sharedApis();
    db = new MongoClient(baseTestEnv().MONGO_URL!);
    atFileEnd(() => db.close());
  });

  it('changes each field alone, answers the subscription as GET shows it (no secret), keeps the secret', async () => {
    const acct = await createAccount(api.url);
    const created = await hooks(acct, 'POST', '', { url: 'https://127.0.0.1/p1', events: ['call.started'], description: 'first' });
    expect(created.status).to.equal(201);
    const id = created.body.id;
    expect(created.body.enabled).to.equal(true);

    expect(created.body).to.include({ disabled_reason: null, disabled_at: null, rate_limit: null, ordering: 'unordered' });
    const manual = { enabled: false, disabled_reason: 'manual' };
    const on = { enabled: true, disabled_reason: null, disabled_at: null };
    const steps: [Record<string, unknown>, Record<string, unknown>][] = [
      [{ url: 'https://127.0.0.1:8443/p2?x=1' }, { url: 'https://127.0.0.1:8443/p2?x=1' }],
      [{ events: ['message.sent', 'call.ended'] }, { events: ['message.sent', 'call.ended'] }],
      [{ description: 'second' }, { description: 'second' }],
      [{ rate_limit: 50 }, { rate_limit: 50 }],
      [{ ordering: 'fifo' }, { ordering: 'fifo' }],
      [{ ordering: 'unordered' }, { ordering: 'unordered' }],
      [{ headers: { 'X-Api-Key': 'k1', 'X-Tenant': 't' } }, { headers: { 'X-Api-Key': '****', 'X-Tenant': '****' } }],
      [{ headers: {} }, { headers: {} }],
      [{ enabled: false }, manual],
      [{ enabled: true }, on],
      [{ events: ['*'], description: '', enabled: false, rate_limit: null }, { events: ['*'], description: '', rate_limit: null, ...manual }],
    ];
    let expected = { ...created.body };
    delete expected.secret;
    for (const [body, change] of steps) {
      const before = Date.now();
      const res = await hooks(acct, 'PATCH', `/${id}`, body);
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(res.body).to.have.all.keys(...WEBHOOK_KEYS);
      // Disabled by hand: since the PATCH.
      const disabledAt = body.enabled === false ? res.body.disabled_at : null;
      if (disabledAt !== null) expect(Date.parse(disabledAt)).to.be.within(before - 1000, Date.now() + 1000);
      expected = { ...expected, ...change, disabled_at: disabledAt };
      expect(res.body).to.deep.equal(expected);
      expect((await hooks(acct, 'GET', `/${id}`)).body).to.deep.equal(expected);
    }
    expect((await hooks(acct, 'GET')).body.webhooks).to.deep.equal([expected]);
    expect((await hooks(acct, 'POST', `/${id}/secret`)).body).to.deep.equal({ secret: created.body.secret });
  });

  it('stores a new url in canonical form', async () => {
    const acct = await createAccount(api.url);
    const { body } = await hooks(acct, 'POST', '', { url: 'https://127.0.0.1/c', events: ['*'] });
    const res = await hooks(acct, 'PATCH', `/${body.id}`, { url: 'HTTPS://127.0.0.1:443/a/../b' });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body.url).to.equal('https://127.0.0.1/b');
  });

  it('shows enabled: true for a stored subscription without the field (written before it existed)', async () => {
    const acct = await createAccount(api.url);
    const { body } = await hooks(acct, 'POST', '', { url: 'https://127.0.0.1/old', events: ['*'] });
    await db.db(webhookTestEnv().MONGO_DB).collection<{ _id: string }>('webhooks').updateOne({ _id: body.id }, { $unset: { enabled: '' } });
    expect((await hooks(acct, 'GET', `/${body.id}`)).body.enabled).to.equal(true);
    expect((await hooks(acct, 'PATCH', `/${body.id}`, { description: 'x' })).body.enabled).to.equal(true);
  });

  it('shows why and since when the delivery process disabled it; enabled:false keeps that, enabled:true clears it', async () => {
    const acct = await createAccount(api.url);
    const { body } = await hooks(acct, 'POST', '', { url: 'https://127.0.0.1/failing', events: ['*'], rate_limit: 5 });
    expect(body).to.include({ rate_limit: 5, disabled_reason: null, disabled_at: null });
    const since = new Date('2026-01-02T03:04:05.000Z');
    // What delivery/src/endpoint-health.ts writes once every attempt failed for the period.
    const webhooks = db.db(webhookTestEnv().MONGO_DB).collection<{ _id: string }>('webhooks');
    await webhooks.updateOne({ _id: body.id }, { $set: { enabled: false, disabled_reason: 'endpoint_failing', disabled_at: since } });
    const shown = { enabled: false, disabled_reason: 'endpoint_failing', disabled_at: since.toISOString() };
    expect((await hooks(acct, 'GET', `/${body.id}`)).body).to.include(shown);
    expect((await hooks(acct, 'GET')).body.webhooks[0]).to.include(shown);
    // Disabling what is disabled already keeps the first reason.
    expect((await hooks(acct, 'PATCH', `/${body.id}`, { enabled: false })).body).to.include(shown);
    const res = await hooks(acct, 'PATCH', `/${body.id}`, { enabled: true });
    expect(res.body).to.include({ enabled: true, disabled_reason: null, disabled_at: null, rate_limit: 5 });
    const stored = await webhooks.findOne({ _id: body.id });
    expect(stored).to.not.have.any.keys('disabled_reason', 'disabled_at');
    expect(stored).to.have.property('enabled_at');
  });

  it('refuses bad input with 400 naming the field, and changes nothing', async () => {
    const acct = await createAccount(api.url);
    const { body: hook } = await hooks(acct, 'POST', '', { url: 'https://127.0.0.1/v', events: ['call.started'], description: 'keep' });
    const { secret: _secret, ...before } = hook;
    const bad: [unknown, string][] = [
      [{}, 'body'],
      [{ enabled: 'no' }, 'enabled'],
      [{ enabled: null }, 'enabled'],
      [{ events: [] }, 'events'],
      [{ events: ['call.exploded'] }, 'events.0'],
      [{ events: ['*', 'call.started'] }, 'events'],
      [{ events: ['call.started', 'call.started'] }, 'events'],
      [{ description: 'x'.repeat(501) }, 'description'],
      [{ url: '' }, 'url'],
      [{ url: `https://127.0.0.1/${'a'.repeat(2048)}` }, 'url'],
      [{ url: 42 }, 'url'],
      [{ description: 'ok', secret: 'whsec_mine' }, 'secret'],
      [{ id: 'wh_000000000000000000000000' }, 'id'],
      [{ created_at: '2020-01-01T00:00:00Z', enabled: true }, 'created_at'],
      [{ rate_limit: 0 }, 'rate_limit'],
      [{ rate_limit: 10_001 }, 'rate_limit'],
      [{ rate_limit: 2.5 }, 'rate_limit'],
      [{ rate_limit: '5' }, 'rate_limit'],
      [{ ordering: 'FIFO' }, 'ordering'],
      [{ ordering: null }, 'ordering'],
      [{ disabled_reason: null, enabled: true }, 'disabled_reason'],
      [{ headers: { 'X-Service-Event': 'x' } }, 'headers.X-Service-Event'],
      [{ headers: { 'X-A': 5 } }, 'headers.X-A'],
      [{ headers: ['X-A'] }, 'headers'],
    ];
    for (const [body, path] of bad) {
      const res = await hooks(acct, 'PATCH', `/${hook.id}`, body);
      expect(res.status, JSON.stringify(body)).to.equal(400);
      expect(res.body.error.code).to.equal('validation_failed');
      expect(res.body.error.details.map((d: { path: string }) => d.path), JSON.stringify(res.body)).to.include(path);
    }
    const notJson = await call(api.url, 'PATCH', `/api/v1/webhooks/${hook.id}`, { headers: bearer(acct.apiKey), raw: '[true]' });
    expect(notJson.status).to.equal(400);
    expect((await hooks(acct, 'GET', `/${hook.id}`)).body).to.deep.equal(before);
  });

  it('applies the creation URL checks on a default (strict) API: https, port policy, no private or internal address, the rule named', async () => {
    const acct = await createAccount(strict.url);
    const created = await hooks(acct, 'POST', '', { url: 'https://93.184.216.34/in', events: ['*'] }, strict);
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const cases: [string, RegExp][] = [
      ['http://example.com/hook', /https/],
      ['https://127.0.0.1/hook', /loopback/],
      ['https://10.1.2.3/hook', /private/],
      ['https://169.254.169.254/latest/meta-data', /link-local/],
      ['https://localhost/hook', /local or internal name/],
      ['https://user:pass@example.com/hook', /credentials/],
      ['https://93.184.216.34:22/hook', /port/],
    ];
    for (const [url, reason] of cases) {
      const res = await hooks(acct, 'PATCH', `/${created.body.id}`, { url, enabled: false }, strict);
      expect(res.status, url).to.equal(400);
      expect(res.body.error.code).to.equal('validation_failed');
      expect(res.body.error.details[0].path).to.equal('url');
      expect(res.body.error.message, url).to.match(reason);
    }
    const now = await hooks(acct, 'GET', `/${created.body.id}`, undefined, strict);
    expect(now.body).to.include({ url: 'https://93.184.216.34/in', enabled: true });
    const ok = await hooks(acct, 'PATCH', `/${created.body.id}`, { url: 'https://1.1.1.1:8443/out' }, strict);
    expect(ok.status, JSON.stringify(ok.body)).to.equal(200);
    expect(ok.body.url).to.equal('https://1.1.1.1:8443/out');
  });

  it('is never undone by the delivery process recording an attempt at the same moment (FerretDB writes whole documents)', async function () {
    // 30 PATCHes of `enabled`, each answered 1 s after it is stored (the subscription fence).
    this.timeout(90_000);
    const acct = await createAccount(api.url);
    const { body } = await hooks(acct, 'POST', '', { url: 'https://127.0.0.1/race', events: ['*'] });
    const recorder = new AttemptRecorder({ ...api.deps.mongo.collections, dueWrites: new DueWriteOrder() });
    const base = Date.now();
    // A status written into the subscription's document loses about 1 PATCH in 7 of these pairs.
    for (let i = 1; i <= 30; i++) {
      const delivery = { _id: `dlv_race_${i}_${body.id}`, subscription_id: body.id, claim_seq: 1, attempts: 0 } as unknown as DeliveryDoc;
      const attempt = { delivery, attempt: 1, status: 200, outcome: 'ok' as const, error: null, durationMs: 5, at: new Date(base + i), nextAttemptAt: null };
      const [patched] = await Promise.all([hooks(acct, 'PATCH', `/${body.id}`, { description: `v${i}`, enabled: i % 2 === 0 }), recorder.record(attempt, `att_race_${i}_${body.id}`)]);
      expect(patched.status).to.equal(200);
      let now = (await hooks(acct, 'GET', `/${body.id}`)).body;
      // last_* are coalesced (at most one write per subscription per 250 ms): true within that bound.
      for (let t = 0; t < 40 && now.last_delivery_at !== new Date(base + i).toISOString(); t++) {
        await new Promise((r) => setTimeout(r, 50));
        now = (await hooks(acct, 'GET', `/${body.id}`)).body;
      }
      expect(now, `round ${i}`).to.include({ description: `v${i}`, enabled: i % 2 === 0, last_status: 200 });
      expect(now.last_delivery_at).to.equal(new Date(base + i).toISOString());
    }
  });

  it("answers 404 for another account's, an unknown, a malformed and a deleted id; 401 without credentials", async () => {
    const owner = await createAccount(api.url);
    const stranger = await createAccount(api.url);
    const { body } = await hooks(owner, 'POST', '', { url: 'https://127.0.0.1/o', events: ['*'], description: 'mine' });
    for (const id of [body.id, 'wh_000000000000000000000000', 'wh_nothex']) {
      const res = await hooks(stranger, 'PATCH', `/${id}`, { enabled: false, description: 'theirs' });
      expect(res.status, id).to.equal(404);
      expect(res.body.error.code).to.equal('not_found');
    }
    expect((await hooks(owner, 'GET', `/${body.id}`)).body).to.include({ description: 'mine', enabled: true });
    expect((await call(api.url, 'PATCH', `/api/v1/webhooks/${body.id}`, { body: { enabled: false } })).status).to.equal(401);
    expect((await hooks(owner, 'DELETE', `/${body.id}`)).status).to.equal(204);
    expect((await hooks(owner, 'PATCH', `/${body.id}`, { enabled: true })).status).to.equal(404);
  });
});

describe('PATCH /api/v1/webhooks/{id} end to end (delivery process, HTTPS receiver)', function () {
  this.timeout(90_000);
  let api: RunningApi;
  let receiver: Receiver;
  let db: MongoClient;

  const ingest = async (acct: TestAccount, type: string): Promise<string> => {
    const res = await call(api.url, 'POST', '/internal/v1/events', { headers: bearer(api.deps.config.ingestToken), body: { account_id: acct.userId, type, data: {} } });
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    return res.body.events[0].id;
  };
  const subscribe = async (acct: TestAccount, path: string, events: string[]): Promise<string> => {
    const res = await call(api.url, 'POST', '/api/v1/webhooks', { headers: bearer(acct.apiKey), body: { url: receiver.url(path), events } });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return res.body.id;
  };
  const patch = async (acct: TestAccount, id: string, body: unknown): Promise<void> => {
    const res = await call(api.url, 'PATCH', `/api/v1/webhooks/${id}`, { headers: bearer(acct.apiKey), body });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
  };
  const idsAt = (path: string): string[] => receiver.received(path).map((r) => r.body.id as string);
  /** Waits until `path` (a witness subscribed to everything) has the event: the consumer has planned every delivery of it by then. */
  const witnessed = async (path: string, eventId: string): Promise<void> => {
    for (let i = 0; i < 300 && !idsAt(path).includes(eventId); i++) await new Promise((r) => setTimeout(r, 100));
    expect(idsAt(path), `witness ${path}`).to.include(eventId);
  };
  const deliveries = () => db.db(webhookTestEnv().MONGO_DB).collection<{ _id: string; state: string; last_outcome: string | null; subscription_id: string }>('deliveries');

  before(async function () {
    this.timeout(120_000);
    receiver = await Receiver.start();
    ({ api } = await webhookApi());
    db = new MongoClient(baseTestEnv().MONGO_URL!);
    atFileEnd(() => db.close());
    const env = deliveryTestEnv(receiver.caFile, webhookTestEnv());
    await startTestDelivery(env);
    await waitForGroup(env);
    // The delivery group settles on the topic before anything is measured.
    const probe = await createAccount(api.url);
    await subscribe(probe, '/upd-probe', ['*']);
    await ingest(probe, 'call.started');
    await receiver.waitFor('/upd-probe', 1, 90_000);
  });
  after(() => receiver.close());

  it('sends nothing to a disabled subscription for events after the PATCH, and sends again after re-enabling', async () => {
    const acct = await createAccount(api.url);
    const witness = await subscribe(acct, '/upd-witness-1', ['*']);
    const sub = await subscribe(acct, '/upd-toggle', ['*']);
    expect(witness).to.be.a('string');

    const before = await ingest(acct, 'call.started');
    await receiver.waitFor('/upd-toggle', 1);
    expect(idsAt('/upd-toggle')).to.deep.equal([before]);

    await patch(acct, sub, { enabled: false });
    const whileOff = [await ingest(acct, 'call.ended'), await ingest(acct, 'message.sent')];
    for (const id of whileOff) await witnessed('/upd-witness-1', id);
    // No delivery was even planned for it.
    for (const id of whileOff) expect(await deliveries().findOne({ _id: deliveryId(id, sub) }), JSON.stringify(await deliveries().findOne({ _id: deliveryId(id, sub) }))).to.equal(null);

    await patch(acct, sub, { enabled: true });
    const after = await ingest(acct, 'message.received');
    await receiver.waitFor('/upd-toggle', 2);
    await witnessed('/upd-witness-1', after);
    expect(idsAt('/upd-toggle')).to.deep.equal([before, after]);
  });

  it('gives up, unsent, deliveries that were retrying when the subscription was disabled', async () => {
    const acct = await createAccount(api.url);
    receiver.on('/upd-retrying', status(503));
    const sub = await subscribe(acct, '/upd-retrying', ['call.started']);
    const eventId = await ingest(acct, 'call.started');
    await receiver.waitFor('/upd-retrying', 1);
    await patch(acct, sub, { enabled: false });
    const atPatch = receiver.received('/upd-retrying').length;

    const id = deliveryId(eventId, sub);
    let doc = await deliveries().findOne({ _id: id });
    // The retry document is written right after the failed attempt: wait for it too.
    for (let i = 0; i < 300 && doc?.state !== 'failed'; i++) {
      await new Promise((r) => setTimeout(r, 100));
      doc = await deliveries().findOne({ _id: id });
    }
    expect(doc).to.include({ state: 'failed', last_outcome: 'subscription_disabled' });
    // At most the one attempt that may have read the subscription before the PATCH wrote it.
    const atGiveUp = receiver.received('/upd-retrying').length;
    expect(atGiveUp).to.be.at.most(atPatch + 1);
    // With the 1 s retry schedule a kept delivery would have been retried by now.
    await new Promise((r) => setTimeout(r, 2500));
    expect(receiver.received('/upd-retrying').length).to.equal(atGiveUp);
    // Re-enabling does not bring it back.
    await patch(acct, sub, { enabled: true });
    expect(await deliveries().findOne({ _id: id })).to.include({ state: 'failed' });
  });

  it('delivers by the new events list and to the new url once the PATCH has returned', async () => {
    const acct = await createAccount(api.url);
    await subscribe(acct, '/upd-witness-2', ['*']);
    const sub = await subscribe(acct, '/upd-old', ['call.started']);

    const first = await ingest(acct, 'call.started');
    await receiver.waitFor('/upd-old', 1);

    await patch(acct, sub, { events: ['message.sent'] });
    const ignored = await ingest(acct, 'call.started');
    const wanted = await ingest(acct, 'message.sent');
    await receiver.waitFor('/upd-old', 2);
    await witnessed('/upd-witness-2', ignored);
    await witnessed('/upd-witness-2', wanted);
    expect(idsAt('/upd-old')).to.deep.equal([first, wanted]);

    await patch(acct, sub, { url: receiver.url('/upd-new'), events: ['*'] });
    const moved = await ingest(acct, 'call.ended');
    await receiver.waitFor('/upd-new', 1);
    await witnessed('/upd-witness-2', moved);
    expect(idsAt('/upd-new')).to.deep.equal([moved]);
    expect(idsAt('/upd-old')).to.deep.equal([first, wanted]);
  });
});
