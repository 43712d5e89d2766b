/**
 * POST /api/v1/webhooks/{id}/secret/rotate: a new whsec_ secret; for the
 * grace period deliveries are signed with both (checked with the official
 * `standardwebhooks` verifier holding either secret), X-Service-Signature
 * with the new one; with grace 0 or after the grace period only the new one
 * verifies. Plus the input bounds, ownership (404), auth (401), and two
 * rotations at the same moment (one 409, no secret lost).
 */
import { expect } from 'chai';
import { Webhook } from 'standardwebhooks';
import { verifyServiceSignature } from '#shared/signing.js';
import type { WebhookDoc } from '#shared/mongo/index.js';
import { Receiver, type Received } from '#test-support/receiver.js';
import { deliveryTestEnv, startTestDelivery, waitForGroup } from '../../delivery/test/support/delivery.js';
import type { RunningDelivery } from '../../delivery/src/worker.js';
import { rotateSecret, ROTATION_CLAIM_STALE_MS } from '../src/features/webhooks/service.js';
import { DEFAULT_GRACE_PERIOD_S, MAX_GRACE_PERIOD_S } from '../src/features/webhooks/schemas.js';
import type { RunningApi } from '../src/server.js';
import { bearer, createAccount, type TestAccount } from './support/accounts.js';
import { call } from './support/api.js';
import { webhookApi, webhookTestEnv } from './support/webhooks.js';

const rotatePath = (id: string): string => `/api/v1/webhooks/${id}/secret/rotate`;

/** What the official verifier says of a received delivery: true when it verifies with `secret`. */
function standardVerifies(secret: string, req: Received): boolean {
  const headers = { 'webhook-id': String(req.headers['webhook-id']), 'webhook-timestamp': String(req.headers['webhook-timestamp']), 'webhook-signature': String(req.headers['webhook-signature']) };
  try {
    new Webhook(secret).verify(req.raw.toString('utf8'), headers);
    return true;
  } catch {
    return false;
  }
}

describe('POST /api/v1/webhooks/{id}/secret/rotate', () => {
  let api: RunningApi;

  const hooks = (acct: TestAccount, method: string, path = '', body?: unknown) => call(api.url, method, `/api/v1/webhooks${path}`, { headers: bearer(acct.apiKey), body });
  const stored = async (id: string): Promise<WebhookDoc> => (await api.deps.mongo.collections.webhooks.findOne({ _id: id }))!;
  const open = (doc: WebhookDoc, sealed: string | undefined): string | null => (sealed ? api.deps.secretBox.open(sealed, doc._id) : null);

  before(async () => {
    ({ api } = await webhookApi());
  });

  it('answers a new whsec_ secret that the re-reveal operation then shows; the default grace period is 24 h; no-store', async () => {
    const acct = await createAccount(api.url);
    const { body: created } = await hooks(acct, 'POST', '', { url: 'https://127.0.0.1/rot', events: ['*'] });
    const before = Date.now();
    const res = await call(api.url, 'POST', rotatePath(created.id), { headers: bearer(acct.apiKey) });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.headers.get('cache-control')).to.equal('no-store');
    expect(res.body).to.have.all.keys('secret', 'previous_secret_expires_at');
    expect(res.body.secret).to.match(/^whsec_[A-Za-z0-9+/]{43}=$/).and.not.equal(created.secret);
    const expires = Date.parse(res.body.previous_secret_expires_at);
    expect(expires).to.be.within(before + DEFAULT_GRACE_PERIOD_S * 1000 - 1000, Date.now() + DEFAULT_GRACE_PERIOD_S * 1000 + 1000);
    expect((await hooks(acct, 'POST', `/${created.id}/secret`)).body).to.deep.equal({ secret: res.body.secret });
    // Stored sealed, never in plain text; the replaced secret kept beside it until then.
    const doc = await stored(created.id);
    expect(JSON.stringify(doc)).to.not.include(res.body.secret).and.not.include(created.secret);
    expect(open(doc, doc.secret_enc)).to.equal(res.body.secret);
    expect(open(doc, doc.previous_secret_enc)).to.equal(created.secret);
    expect(doc.previous_secret_expires_at!.toISOString()).to.equal(res.body.previous_secret_expires_at);
    // The subscription itself is unchanged and shows no secret.
    const { secret: _s, ...shown } = created;
    expect((await hooks(acct, 'GET', `/${created.id}`)).body).to.deep.equal(shown);
  });

  it('takes grace_period_s from 0 (the old secret stops at once) to 7 days; an empty object is the default', async () => {
    const acct = await createAccount(api.url);
    const { body: created } = await hooks(acct, 'POST', '', { url: 'https://127.0.0.1/grace', events: ['*'] });
    const zero = await hooks(acct, 'POST', `/${created.id}/secret/rotate`, { grace_period_s: 0 });
    expect(zero.status, JSON.stringify(zero.body)).to.equal(200);
    expect(zero.body.previous_secret_expires_at).to.equal(null);
    let doc = await stored(created.id);
    expect(doc.previous_secret_enc).to.equal(undefined);
    expect(doc.previous_secret_expires_at).to.equal(undefined);

    const max = await hooks(acct, 'POST', `/${created.id}/secret/rotate`, { grace_period_s: MAX_GRACE_PERIOD_S });
    expect(max.status, JSON.stringify(max.body)).to.equal(200);
    expect(Date.parse(max.body.previous_secret_expires_at) - Date.now()).to.be.within(MAX_GRACE_PERIOD_S * 1000 - 5000, MAX_GRACE_PERIOD_S * 1000);
    const empty = await hooks(acct, 'POST', `/${created.id}/secret/rotate`, {});
    expect(empty.status).to.equal(200);
    expect(Date.parse(empty.body.previous_secret_expires_at) - Date.now()).to.be.within(DEFAULT_GRACE_PERIOD_S * 1000 - 5000, DEFAULT_GRACE_PERIOD_S * 1000);

    // At most two secrets: rotating during a grace period drops the oldest at once.
    doc = await stored(created.id);
    expect(open(doc, doc.secret_enc)).to.equal(empty.body.secret);
    expect(open(doc, doc.previous_secret_enc)).to.equal(max.body.secret);
    expect(doc.secret_gen).to.equal(3);
  });

  it('refuses a bad grace_period_s or an unknown field with 400 naming it, and rotates nothing', async () => {
    const acct = await createAccount(api.url);
    const { body: created } = await hooks(acct, 'POST', '', { url: 'https://127.0.0.1/bad', events: ['*'] });
    const bad: [unknown, string][] = [
      [{ grace_period_s: -1 }, 'grace_period_s'],
      [{ grace_period_s: MAX_GRACE_PERIOD_S + 1 }, 'grace_period_s'],
      [{ grace_period_s: 1.5 }, 'grace_period_s'],
      [{ grace_period_s: '60' }, 'grace_period_s'],
      [{ grace_period_s: null }, 'grace_period_s'],
      [{ grace_period_s: 60, secret: 'whsec_mine' }, 'secret'],
      [[60], 'body'],
    ];
    for (const [body, path] of bad) {
      const res = await hooks(acct, 'POST', `/${created.id}/secret/rotate`, body);
      expect(res.status, JSON.stringify(body)).to.equal(400);
      expect(res.body.error.code).to.equal('validation_failed');
      expect(res.body.error.details.map((d: { path: string }) => d.path), JSON.stringify(res.body)).to.include(path);
    }
    const text = await call(api.url, 'POST', rotatePath(created.id), { headers: { ...bearer(acct.apiKey), 'content-type': 'text/plain' }, raw: '60' });
    expect(text.status).to.equal(415);
    expect((await hooks(acct, 'POST', `/${created.id}/secret`)).body).to.deep.equal({ secret: created.secret });
    expect((await stored(created.id)).secret_gen).to.equal(undefined);
  });

  it("answers 404 for another account's, an unknown, a malformed and a deleted id; 401 without credentials", async () => {
    const owner = await createAccount(api.url);
    const stranger = await createAccount(api.url);
    const { body: created } = await hooks(owner, 'POST', '', { url: 'https://127.0.0.1/own', events: ['*'] });
    for (const id of [created.id, 'wh_000000000000000000000000', 'wh_nothex']) {
      const res = await hooks(stranger, 'POST', `/${id}/secret/rotate`, { grace_period_s: 0 });
      expect(res.status, id).to.equal(404);
      expect(res.body.error.code).to.equal('not_found');
    }
    const anonymous = await call(api.url, 'POST', rotatePath(created.id), { body: { grace_period_s: 0 } });
    expect(anonymous.status).to.equal(401);
    expect((await hooks(owner, 'POST', `/${created.id}/secret`)).body).to.deep.equal({ secret: created.secret });
    expect((await hooks(owner, 'DELETE', `/${created.id}`)).status).to.equal(204);
    expect((await hooks(owner, 'POST', `/${created.id}/secret/rotate`, {})).status).to.equal(404);
    // Deleting the subscription removes its rotation claims too.
    expect(await api.deps.mongo.collections.secretRotations.countDocuments({ subscription_id: created.id })).to.equal(0);
  });

  it('of two rotations that read the subscription at the same moment, one writes and the other is a 409: no secret handed out is lost', async () => {
    const acct = await createAccount(api.url);
    const { body: created } = await hooks(acct, 'POST', '', { url: 'https://127.0.0.1/race', events: ['*'] });
    for (let round = 0; round < 5; round++) {
      const before = await stored(created.id);
      const current = open(before, before.secret_enc);
      // Both have read the subscription before either claims: the case a plain update would lose a secret in.
      let arrived = 0;
      let release!: () => void;
      const bothRead = new Promise<void>((r) => (release = r));
      const afterRead = async (): Promise<void> => {
        if (++arrived === 2) release();
        await bothRead;
      };
      const results = await Promise.allSettled([0, 1].map(() => rotateSecret(api.deps, acct.userId, created.id, { grace_period_s: 3600 }, { afterRead })));
      const won = results.filter((r) => r.status === 'fulfilled');
      const lost = results.filter((r) => r.status === 'rejected');
      expect(won, `round ${round}`).to.have.length(1);
      expect((lost[0] as PromiseRejectedResult).reason).to.include({ code: 'conflict' });
      const doc = await stored(created.id);
      expect(open(doc, doc.secret_enc)).to.equal((won[0] as PromiseFulfilledResult<{ secret: string }>).value.secret);
      expect(open(doc, doc.previous_secret_enc)).to.equal(current);
    }
    const over = await hooks(acct, 'POST', `/${created.id}/secret/rotate`, {});
    expect(over.status).to.equal(200);
  });

  it('answers 409 while another rotation holds the claim, and skips a claim whose rotation died before writing', async () => {
    const acct = await createAccount(api.url);
    const { body: created } = await hooks(acct, 'POST', '', { url: 'https://127.0.0.1/stale', events: ['*'] });
    const claims = api.deps.mongo.collections.secretRotations;
    await claims.insertOne({ _id: `${created.id}:1`, subscription_id: created.id, at: new Date() });
    const busy = await hooks(acct, 'POST', `/${created.id}/secret/rotate`, {});
    expect(busy.status).to.equal(409);
    expect(busy.body.error.code).to.equal('conflict');
    expect((await hooks(acct, 'POST', `/${created.id}/secret`)).body).to.deep.equal({ secret: created.secret });

    await claims.updateOne({ _id: `${created.id}:1` }, { $set: { at: new Date(Date.now() - ROTATION_CLAIM_STALE_MS - 1000) } });
    const res = await hooks(acct, 'POST', `/${created.id}/secret/rotate`, {});
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect((await stored(created.id)).secret_gen).to.equal(2);
    expect((await hooks(acct, 'POST', `/${created.id}/secret`)).body).to.deep.equal({ secret: res.body.secret });
  });
});

describe('secret rotation end to end (delivery process, HTTPS receiver, standardwebhooks verifier)', function () {
  this.timeout(90_000);
  let api: RunningApi;
  let receiver: Receiver;
  let worker: RunningDelivery;

  const ingest = async (acct: TestAccount): Promise<string> => {
    const res = await call(api.url, 'POST', '/internal/v1/events', { headers: bearer(api.deps.config.ingestToken), body: { account_id: acct.userId, type: 'call.started', data: {} } });
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    return res.body.events[0].id;
  };
  const subscribe = async (acct: TestAccount, path: string): Promise<{ id: string; secret: string }> => {
    const res = await call(api.url, 'POST', '/api/v1/webhooks', { headers: bearer(acct.apiKey), body: { url: receiver.url(path), events: ['*'] } });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return res.body;
  };
  const rotate = async (acct: TestAccount, id: string, grace: number): Promise<{ secret: string; previous_secret_expires_at: string | null }> => {
    const res = await call(api.url, 'POST', rotatePath(id), { headers: bearer(acct.apiKey), body: { grace_period_s: grace } });
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    return res.body;
  };
  /** Ingests one event and answers the (first) request that delivered it. */
  const deliver = async (acct: TestAccount, path: string): Promise<Received> => {
    const eventId = await ingest(acct);
    const of = (): Received | undefined => receiver.received(path).find((r) => r.body.id === eventId);
    for (let i = 0; i < 600 && !of(); i++) await new Promise((r) => setTimeout(r, 100));
    expect(of(), `delivery of ${eventId}`).to.not.equal(undefined);
    return of()!;
  };

  before(async function () {
    this.timeout(120_000);
    receiver = await Receiver.start();
    ({ api } = await webhookApi());
    const env = deliveryTestEnv(receiver.caFile, webhookTestEnv());
    worker = await startTestDelivery(env);
    await waitForGroup(env);
    // The delivery group settles on the topic before anything is measured.
    const probe = await createAccount(api.url);
    await subscribe(probe, '/rot-probe');
    await ingest(probe);
    await receiver.waitFor('/rot-probe', 1, 90_000);
  });
  after(async () => {
    await worker.close(); // not left running beside other tests' delivery processes
    await receiver.close();
  });

  it('signs with both secrets during the grace period (either verifier passes), X-Service-Signature with the new one', async () => {
    const acct = await createAccount(api.url);
    const sub = await subscribe(acct, '/rot-both');
    const first = await deliver(acct, '/rot-both');
    expect(standardVerifies(sub.secret, first)).to.equal(true);
    expect(String(first.headers['webhook-signature']).split(' ')).to.have.length(1);

    const rotated = await rotate(acct, sub.id, 3600);
    const req = await deliver(acct, '/rot-both');
    expect(String(req.headers['webhook-signature']).split(' ')).to.have.length(2);
    expect(standardVerifies(sub.secret, req), 'verifier holding the old secret').to.equal(true);
    expect(standardVerifies(rotated.secret, req), 'verifier holding the new secret').to.equal(true);
    expect(verifyServiceSignature(rotated.secret, req.raw, req.headers['x-service-signature'] as string)).to.equal(true);
    expect(verifyServiceSignature(sub.secret, req.raw, req.headers['x-service-signature'] as string)).to.equal(false);
    // A secret that was never this subscription's verifies nothing.
    expect(standardVerifies('whsec_' + Buffer.alloc(32, 1).toString('base64'), req)).to.equal(false);
  });

  it('with grace_period_s 0 only the new secret verifies the next delivery', async () => {
    const acct = await createAccount(api.url);
    const sub = await subscribe(acct, '/rot-zero');
    const rotated = await rotate(acct, sub.id, 0);
    const req = await deliver(acct, '/rot-zero');
    expect(String(req.headers['webhook-signature']).split(' ')).to.have.length(1);
    expect(standardVerifies(sub.secret, req), 'verifier holding the old secret').to.equal(false);
    expect(standardVerifies(rotated.secret, req), 'verifier holding the new secret').to.equal(true);
    expect(verifyServiceSignature(rotated.secret, req.raw, req.headers['x-service-signature'] as string)).to.equal(true);
  });

  it('after the grace period the old secret signs nothing', async () => {
    const acct = await createAccount(api.url);
    const sub = await subscribe(acct, '/rot-expired');
    const rotated = await rotate(acct, sub.id, 1);
    // Wait past the expiry (a short grace period rather than a clock hook: the delivery process reads its own clock).
    const left = Date.parse(rotated.previous_secret_expires_at!) - Date.now();
    await new Promise((r) => setTimeout(r, Math.max(0, left) + 200));
    const req = await deliver(acct, '/rot-expired');
    expect(String(req.headers['webhook-signature']).split(' ')).to.have.length(1);
    expect(standardVerifies(sub.secret, req), 'verifier holding the old secret').to.equal(false);
    expect(standardVerifies(rotated.secret, req), 'verifier holding the new secret').to.equal(true);
    // Twice in a row within a long grace period: the secret before the last one no longer verifies.
    const second = await rotate(acct, sub.id, 3600);
    const third = await rotate(acct, sub.id, 3600);
    const latest = await deliver(acct, '/rot-expired');
    expect(standardVerifies(third.secret, latest)).to.equal(true);
    expect(standardVerifies(second.secret, latest)).to.equal(true);
    expect(standardVerifies(rotated.secret, latest)).to.equal(false);
  });
});
