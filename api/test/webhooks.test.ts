/**
 * Webhook subscriptions over HTTP: create, list, get, delete, reveal the
 * secret, the attempt list; validation; ownership (another account's id is
 * 404); secrets encrypted at rest; the per-account cap.
 */
import { expect } from 'chai';
import { MongoClient } from 'mongodb';
import { loadWebhookConfig } from '#shared/config/webhooks.js';
import { SecretBox } from '#shared/secrets.js';
import { atFileEnd } from '#test-support/cleanup.js';
import { baseTestEnv } from '#test-support/env.js';
import type { RunningApi } from '../src/server.js';
import { bearer, createAccount, type TestAccount } from './support/accounts.js';
import { call, sharedApis } from './support/api.js';
import { WEBHOOK_CAP_FOR_TESTS, webhookApi, webhookTestEnv } from './support/webhooks.js';

const SECRET_SHAPE = /^whsec_[A-Za-z0-9+/]{43}=$/;
const ID_SHAPE = /^wh_[0-9a-f]{24}$/;

describe('webhook subscriptions API', () => {
  let api: RunningApi;
  let strict: RunningApi;
  let other: RunningApi;
  let db: MongoClient;

  const hooks = (acct: TestAccount, method: string, path = '', body?: unknown) =>
    call(api.url, method, `/api/v1/webhooks${path}`, { headers: bearer(acct.apiKey), body });

  before(async () => {
    ({ api } = await webhookApi());
    [strict, other] = await sharedApis();
    const env = baseTestEnv();
    db = new MongoClient(env.MONGO_URL!);
    atFileEnd(() => db.close());
  });

  it('creates a subscription and shows its whsec_ secret once, then lists and gets it without the secret', async () => {
    const acct = await createAccount(api.url);
    const res = await hooks(acct, 'POST', '', { url: 'https://127.0.0.1:8443/hooks?x=1', events: ['call.started', 'message.sent'], description: 'crm' });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    expect(res.headers.get('cache-control')).to.equal('no-store');
    expect(res.body).to.have.all.keys('id', 'url', 'events', 'description', 'enabled', 'disabled_reason', 'disabled_at', 'rate_limit', 'ordering', 'headers', 'created_at', 'last_status', 'last_delivery_at', 'last_error', 'secret');
    expect(res.body).to.include({ url: 'https://127.0.0.1:8443/hooks?x=1', description: 'crm', last_status: null, last_delivery_at: null, last_error: null, ordering: 'unordered' });
    expect(res.body.id).to.match(ID_SHAPE);
    expect(res.body.secret).to.match(SECRET_SHAPE);
    expect(res.body.events).to.deep.equal(['call.started', 'message.sent']);
    const { secret, ...shown } = res.body;

    const list = await hooks(acct, 'GET');
    expect(list.status).to.equal(200);
    expect(list.body).to.deep.equal({ webhooks: [shown] });
    const one = await hooks(acct, 'GET', `/${shown.id}`);
    expect(one.body).to.deep.equal(shown);
    expect(JSON.stringify([list.body, one.body])).to.not.include(secret);
  });

  it('answers the same from every API process (state is in MongoDB only)', async () => {
    const acct = await createAccount(strict.url);
    // A literal public address: accepted by the default rules without any DNS.
    const created = await call(strict.url, 'POST', '/api/v1/webhooks', { headers: bearer(acct.apiKey), body: { url: 'https://93.184.216.34/in', events: ['*'] } });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const { secret, ...shown } = created.body;
    expect((await call(other.url, 'GET', `/api/v1/webhooks/${shown.id}`, { headers: bearer(acct.token) })).body).to.deep.equal(shown);
    expect((await call(other.url, 'POST', `/api/v1/webhooks/${shown.id}/secret`, { headers: bearer(acct.apiKey) })).body).to.deep.equal({ secret });
    expect((await call(other.url, 'DELETE', `/api/v1/webhooks/${shown.id}`, { headers: bearer(acct.apiKey) })).status).to.equal(204);
    expect((await call(strict.url, 'GET', `/api/v1/webhooks/${shown.id}`, { headers: bearer(acct.apiKey) })).status).to.equal(404);
  });

  it('re-reveals the same secret, which is stored only encrypted', async () => {
    const acct = await createAccount(api.url);
    const created = await hooks(acct, 'POST', '', { url: 'https://127.0.0.1/a', events: ['*'] });
    const revealed = await hooks(acct, 'POST', `/${created.body.id}/secret`);
    expect(revealed.status).to.equal(200);
    expect(revealed.body).to.deep.equal({ secret: created.body.secret });
    const doc = await db.db(webhookTestEnv().MONGO_DB).collection('webhooks').findOne({ _id: created.body.id });
    expect(JSON.stringify(doc)).to.not.include(created.body.secret.slice(6));
    const box = new SecretBox(loadWebhookConfig(baseTestEnv(), false).secretKey);
    expect(box.open(doc!.secret_enc, created.body.id)).to.equal(created.body.secret);
  });

  it('deletes with 204, after which the id is 404 everywhere', async () => {
    const acct = await createAccount(api.url);
    const { body } = await hooks(acct, 'POST', '', { url: 'https://127.0.0.1/d', events: ['*'] });
    expect((await hooks(acct, 'DELETE', `/${body.id}`)).status).to.equal(204);
    for (const [method, path] of [['GET', ''], ['DELETE', ''], ['POST', '/secret'], ['POST', '/ping'], ['GET', '/deliveries']] as const) {
      expect((await hooks(acct, method, `/${body.id}${path}`)).status, `${method} ${path}`).to.equal(404);
    }
    expect((await hooks(acct, 'GET')).body).to.deep.equal({ webhooks: [] });
  });

  it("answers 404, never 403, for another account's subscription", async () => {
    const owner = await createAccount(api.url);
    const stranger = await createAccount(api.url);
    const { body } = await hooks(owner, 'POST', '', { url: 'https://127.0.0.1/o', events: ['*'] });
    for (const [method, path] of [['GET', ''], ['DELETE', ''], ['POST', '/secret'], ['POST', '/ping'], ['GET', '/deliveries']] as const) {
      const res = await hooks(stranger, method, `/${body.id}${path}`);
      expect(res.status, `${method} ${path}`).to.equal(404);
      expect(res.body.error.code).to.equal('not_found');
    }
    expect((await hooks(stranger, 'GET')).body).to.deep.equal({ webhooks: [] });
    expect((await hooks(owner, 'GET', `/${body.id}`)).status).to.equal(200);
    expect((await hooks(owner, 'GET', '/wh_nothex')).status).to.equal(404);
  });

  it('requires credentials', async () => {
    expect((await call(api.url, 'GET', '/api/v1/webhooks')).status).to.equal(401);
    expect((await call(api.url, 'POST', '/api/v1/webhooks', { body: { url: 'https://127.0.0.1/', events: ['*'] } })).status).to.equal(401);
  });

  it('validates events, description, url length and unknown fields, naming each bad field', async () => {
    const acct = await createAccount(api.url);
    const bad: [unknown, string][] = [
      [{ url: 'https://127.0.0.1/', events: ['call.exploded'] }, 'events.0'],
      [{ url: 'https://127.0.0.1/', events: [] }, 'events'],
      [{ url: 'https://127.0.0.1/', events: ['*', 'call.started'] }, 'events'],
      [{ url: 'https://127.0.0.1/', events: ['call.started', 'call.started'] }, 'events'],
      [{ url: 'https://127.0.0.1/', events: '*' }, 'events'],
      [{ url: 'https://127.0.0.1/', events: ['*'], description: 'x'.repeat(501) }, 'description'],
      [{ url: `https://127.0.0.1/${'a'.repeat(2048)}`, events: ['*'] }, 'url'],
      [{ url: 'https://127.0.0.1/', events: ['*'], secret: 'whsec_mine' }, 'secret'],
      [{ events: ['*'] }, 'url'],
      [{ url: 'https://127.0.0.1/', events: ['*'], ordering: 'strict' }, 'ordering'],
    ];
    for (const [body, path] of bad) {
      const res = await hooks(acct, 'POST', '', body);
      expect(res.status, JSON.stringify(body)).to.equal(400);
      expect(res.body.error.details.map((d: { path: string }) => d.path), JSON.stringify(res.body)).to.include(path);
    }
    expect((await hooks(acct, 'GET')).body.webhooks).to.have.length(0);
    const all = await hooks(acct, 'POST', '', { url: 'https://127.0.0.1/', events: ['*'] });
    expect(all.status).to.equal(201);
    expect(all.body.description).to.equal('');
    // Ordered delivery is asked for at creation and shown in every answer.
    const fifo = await hooks(acct, 'POST', '', { url: 'https://127.0.0.1/fifo', events: ['*'], ordering: 'fifo' });
    expect(fifo.status).to.equal(201);
    expect(fifo.body.ordering).to.equal('fifo');
    expect((await hooks(acct, 'GET', `/${fifo.body.id}`)).body.ordering).to.equal('fifo');
    expect((await hooks(acct, 'GET')).body.webhooks.map((w: { ordering: string }) => w.ordering)).to.deep.equal(['unordered', 'fifo']);
  });

  it(`refuses more than the per-account cap with 409 (${WEBHOOK_CAP_FOR_TESTS} in tests, 50 by default)`, async () => {
    const acct = await createAccount(api.url);
    // Concurrent creates must not overshoot the cap either.
    const results = await Promise.all(
      Array.from({ length: WEBHOOK_CAP_FOR_TESTS + 3 }, (_, i) => hooks(acct, 'POST', '', { url: `https://127.0.0.1/cap/${i}`, events: ['*'] })),
    );
    expect(results.filter((r) => r.status === 201).length).to.equal(WEBHOOK_CAP_FOR_TESTS);
    expect(results.filter((r) => r.status !== 201).every((r) => r.status === 409 && r.body.error.code === 'conflict')).to.equal(true);
    let count = (await hooks(acct, 'GET')).body.webhooks.length;
    while (count < WEBHOOK_CAP_FOR_TESTS) {
      expect((await hooks(acct, 'POST', '', { url: 'https://127.0.0.1/more', events: ['*'] })).status).to.equal(201);
      count++;
    }
    expect((await hooks(acct, 'GET')).body.webhooks).to.have.length(WEBHOOK_CAP_FOR_TESTS);
    const over = await hooks(acct, 'POST', '', { url: 'https://127.0.0.1/over', events: ['*'] });
    expect(over.status).to.equal(409);
    expect(over.body.error.message).to.match(/at most 5 webhooks/);
    const first = (await hooks(acct, 'GET')).body.webhooks[0];
    expect((await hooks(acct, 'DELETE', `/${first.id}`)).status).to.equal(204);
    expect((await hooks(acct, 'POST', '', { url: 'https://127.0.0.1/again', events: ['*'] })).status).to.equal(201);
  });

  it('rejects private and non-https targets with 400 naming the reason on a default (strict) API', async () => {
    const acct = await createAccount(strict.url);
    const cases: [string, RegExp][] = [
      ['http://example.com/hook', /https/],
      ['https://127.0.0.1/hook', /loopback/],
      ['https://[::1]/hook', /loopback/],
      ['https://169.254.169.254/latest/meta-data', /link-local/],
      ['https://10.1.2.3/hook', /private/],
      ['https://user:pass@example.com/hook', /credentials/],
      ['https://localhost/hook', /local or internal name/],
      ['https://2130706433/hook', /loopback/],
    ];
    for (const [url, reason] of cases) {
      const res = await call(strict.url, 'POST', '/api/v1/webhooks', { headers: bearer(acct.apiKey), body: { url, events: ['*'] } });
      expect(res.status, url).to.equal(400);
      expect(res.body.error.code).to.equal('validation_failed');
      expect(res.body.error.details).to.deep.include.members([{ path: 'url', message: res.body.error.details[0].message }]);
      expect(res.body.error.message, url).to.match(reason);
    }
    expect((await call(strict.url, 'GET', '/api/v1/webhooks', { headers: bearer(acct.apiKey) })).body.webhooks).to.have.length(0);
  });

  it('lists delivery attempts newest first, limited, with a checked limit parameter', async () => {
    const acct = await createAccount(api.url);
    const { body } = await hooks(acct, 'POST', '', { url: 'https://127.0.0.1/att', events: ['*'] });
    const base = Date.now();
    const attempts = Array.from({ length: 7 }, (_, i) => ({
      _id: `att_${i}_${body.id}`,
      delivery_id: 'dlv_x',
      subscription_id: body.id,
      account_id: acct.userId,
      event_id: `evt_${i}`,
      event_type: 'call.started',
      attempt: i + 1,
      status: i === 6 ? 200 : 500,
      outcome: i === 6 ? 'ok' : 'http_5xx',
      error: null,
      duration_ms: 12,
      at: new Date(base + i * 1000),
      next_attempt_at: i === 6 ? null : new Date(base + i * 1000 + 500),
    }));
    await db.db(webhookTestEnv().MONGO_DB).collection<any>('delivery_attempts').insertMany(attempts);
    const res = await hooks(acct, 'GET', `/${body.id}/deliveries?limit=3`);
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body.attempts.map((a: { attempt: number }) => a.attempt)).to.deep.equal([7, 6, 5]);
    expect(res.body.attempts[0]).to.deep.equal({
      id: `att_6_${body.id}`,
      delivery_id: 'dlv_x',
      event_id: 'evt_6',
      event_type: 'call.started',
      attempt: 7,
      status: 200,
      outcome: 'ok',
      error: null,
      duration_ms: 12,
      at: new Date(base + 6000).toISOString(),
      next_attempt_at: null,
      given_up: false, // it succeeded
      trigger: 'event', // stored without one (as every attempt before the field existed)
    });
    expect((await hooks(acct, 'GET', `/${body.id}/deliveries`)).body.attempts).to.have.length(7);
    expect((await hooks(acct, 'GET', `/${body.id}/deliveries?limit=201`)).status).to.equal(400);
    expect((await hooks(acct, 'GET', `/${body.id}/deliveries?limit=0`)).status).to.equal(400);
  });
});
