/**
 * Per-subscription custom headers (`headers` on POST and PATCH
 * /api/v1/webhooks): refused names and values are a 400 naming the header,
 * every answer shows them masked, the stored document holds them sealed
 * only; and end to end with a real delivery process and an HTTPS receiver:
 * every attempt carries them, and a PATCH applies to a retry already queued.
 */
import { expect } from 'chai';
import { MongoClient } from 'mongodb';
import type { WebhookDoc } from '#shared/mongo/index.js';
import { SecretBox } from '#shared/secrets.js';
import { atFileEnd } from '#test-support/cleanup.js';
import { baseTestEnv } from '#test-support/env.js';
import { Receiver, type Behaviour } from '#test-support/receiver.js';
import { deliveryTestEnv, startTestDelivery, waitForGroup } from '../../delivery/test/support/delivery.js';
import type { RunningApi } from '../src/server.js';
import { bearer, createAccount, type TestAccount } from './support/accounts.js';
import { call } from './support/api.js';
import { webhookApi, webhookTestEnv } from './support/webhooks.js';

describe('webhook custom headers', function () {
  this.timeout(90_000);
  let api: RunningApi;
  let receiver: Receiver;
  let db: MongoClient;

  const webhooks = () => db.db(webhookTestEnv().MONGO_DB).collection<WebhookDoc>('webhooks');
  const hooks = (acct: TestAccount, method: string, path = '', body?: unknown) => call(api.url, method, `/api/v1/webhooks${path}`, { headers: bearer(acct.apiKey), body });
  const ingest = async (acct: TestAccount, type: string): Promise<string> => {
    const res = await call(api.url, 'POST', '/internal/v1/events', { headers: bearer(api.deps.config.ingestToken), body: { account_id: acct.userId, type, data: {} } });
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    return res.body.events[0].id;
  };

  before(async function () {
    this.timeout(120_000);
    receiver = await Receiver.start();
    ({ api } = await webhookApi());
    db = new MongoClient(baseTestEnv().MONGO_URL!);
    atFileEnd(() => db.close());
  });
  after(() => receiver.close());

  it("refuses the service's own headers, hop-by-hop headers, bad names and values and too many, on create and PATCH, with a 400 naming the header", async () => {
    const acct = await createAccount(api.url);
    const url = receiver.url('/h-refused');
    const refused: [Record<string, string>, RegExp][] = [
      [{ 'X-Service-Event': 'x' }, /X-Service-Event is set by the service/],
      [{ 'x-service-signature': 'x' }, /x-service-signature is set by the service/],
      [{ 'webhook-signature': 'v1,x' }, /webhook-signature is set by the service/],
      [{ 'Webhook-Id': 'x' }, /Webhook-Id is set by the service/],
      [{ 'Content-Type': 'text/plain' }, /Content-Type is set by the service/],
      [{ 'User-Agent': 'me' }, /User-Agent is set by the service/],
      [{ 'Content-Length': '1' }, /Content-Length is set by the service/],
      [{ Host: 'evil.example' }, /Host is set by the service/],
      [{ Connection: 'close' }, /Connection is a hop-by-hop header/],
      [{ 'Transfer-Encoding': 'chunked' }, /Transfer-Encoding is a hop-by-hop header/],
      [{ 'Keep-Alive': '1' }, /Keep-Alive is a hop-by-hop header/],
      [{ TE: 'trailers' }, /TE is a hop-by-hop header/],
      [{ Upgrade: 'h2c' }, /Upgrade is a hop-by-hop header/],
      [{ 'Proxy-Authorization': 'Basic x' }, /Proxy-Authorization is a hop-by-hop header/],
      [{ 'X Bad': 'x' }, /"X Bad" is not a valid header name/],
      [{ 'X-Injected': 'a\r\nX-Evil: 1' }, /the value of X-Injected may hold only visible ASCII/],
      [{ 'X-A': '1', 'x-a': '2' }, /x-a is given twice/],
      [{ 'X-Long': 'v'.repeat(1025) }, /1024/],
      [{ 'X-Empty': '' }, /fewer than 1/],
      [Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`X-H${i}`, 'v'])), /more than 20/],
      [Object.fromEntries(Array.from({ length: 5 }, (_, i) => [`X-Big${i}`, 'v'.repeat(1000)])), /more than 4096 bytes/],
    ];
    const created = await hooks(acct, 'POST', '', { url, events: ['*'] });
    expect(created.status).to.equal(201);
    for (const [headers, message] of refused) {
      for (const res of [await hooks(acct, 'POST', '', { url, events: ['*'], headers }), await hooks(acct, 'PATCH', `/${created.body.id}`, { headers })]) {
        expect(res.status, JSON.stringify(headers)).to.equal(400);
        expect(res.body.error.code).to.equal('validation_failed');
        const said = [res.body.error.message, ...((res.body.error.details ?? []) as { message: string }[]).map((d) => d.message)].join('\n');
        expect(said, JSON.stringify(headers)).to.match(message);
      }
    }
    // The service-set name is in the message itself, not only in the details.
    const one = await hooks(acct, 'POST', '', { url, events: ['*'], headers: { 'X-Ok': '1', 'webhook-timestamp': '1' } });
    expect(one.body.error.message).to.equal('headers: webhook-timestamp is set by the service and cannot be set');
    expect((await hooks(acct, 'GET')).body.webhooks).to.have.length(1); // nothing refused was created
  });

  it('shows the headers masked in every answer and stores them sealed, never in the clear', async () => {
    const acct = await createAccount(api.url);
    const secretValue = 'k3y-' + Math.random().toString(36).slice(2);
    const created = await hooks(acct, 'POST', '', { url: receiver.url('/h-mask'), events: ['*'], headers: { 'X-Api-Key': secretValue, Authorization: 'Bearer tok-' + secretValue } });
    expect(created.status, JSON.stringify(created.body)).to.equal(201);
    const masked = { 'X-Api-Key': '****', Authorization: '****' };
    expect(created.body.headers).to.deep.equal(masked);
    const id = created.body.id as string;
    expect((await hooks(acct, 'GET', `/${id}`)).body.headers).to.deep.equal(masked);
    expect((await hooks(acct, 'GET')).body.webhooks[0].headers).to.deep.equal(masked);
    const patched = await hooks(acct, 'PATCH', `/${id}`, { description: 'only this' });
    expect(patched.body.headers).to.deep.equal(masked); // untouched by a PATCH without headers
    for (const res of [created, patched]) expect(JSON.stringify(res.body)).not.to.include(secretValue);

    const raw = (await webhooks().findOne({ _id: id }))!;
    expect(JSON.stringify(raw)).not.to.include(secretValue);
    expect(raw.headers_enc).to.match(/^v1\./);
    expect(raw.header_names).to.deep.equal(['X-Api-Key', 'Authorization']);
    // Sealed under the subscription's own binding: it opens as the headers with the key and `${id}:headers`, not as another record's.
    const box = new SecretBox(api.deps.config.webhooks.secretKey);
    expect(JSON.parse(box.open(raw.headers_enc!, `${id}:headers`))).to.deep.equal({ 'X-Api-Key': secretValue, Authorization: 'Bearer tok-' + secretValue });
    expect(() => box.open(raw.headers_enc!, id)).to.throw();

    const cleared = await hooks(acct, 'PATCH', `/${id}`, { headers: {} });
    expect(cleared.body.headers).to.deep.equal({});
    const after = (await webhooks().findOne({ _id: id }))!;
    expect(after).not.to.have.any.keys('headers_enc', 'header_names');
  });

  describe('with a delivery process', () => {
    before(async function () {
      this.timeout(120_000);
      const env = deliveryTestEnv(receiver.caFile, webhookTestEnv());
      await startTestDelivery(env);
      await waitForGroup(env);
    });

    it('sends them on every attempt beside the service headers, and a PATCH applies to a retry queued before it', async () => {
      const acct = await createAccount(api.url);
      const path = '/h-sent';
      // The first attempt fails with Retry-After 4: its retry waits past the PATCH's answer.
      const behaviour: Behaviour = (n) => (n === 1 ? { status: 503, headers: { 'Retry-After': '4' } } : { status: 200 });
      receiver.on(path, behaviour);
      const created = await hooks(acct, 'POST', '', { url: receiver.url(path), events: ['*'], headers: { 'X-Api-Key': 'first-key', 'X-Tenant': 'acme' } });
      expect(created.status, JSON.stringify(created.body)).to.equal(201);
      const eventId = await ingest(acct, 'call.started');
      const [first] = await receiver.waitFor(path, 1, 30_000);
      expect(first!.headers['x-api-key']).to.equal('first-key');
      expect(first!.headers['x-tenant']).to.equal('acme');
      expect(first!.headers['x-service-event']).to.equal('call.started');
      expect(first!.headers['webhook-signature']).to.match(/^v1,/);
      expect(first!.headers['content-type']).to.equal('application/json');

      const patched = await hooks(acct, 'PATCH', `/${created.body.id}`, { headers: { 'X-Api-Key': 'second-key' } });
      expect(patched.status, JSON.stringify(patched.body)).to.equal(200);
      const got = await receiver.waitFor(path, 2, 30_000);
      const retry = got[1]!;
      expect(retry.body.id).to.equal(eventId);
      expect(retry.headers['x-service-delivery']).to.equal(first!.headers['x-service-delivery']); // the same delivery, retried
      expect(retry.headers['x-api-key']).to.equal('second-key');
      expect(retry.headers).not.to.have.property('x-tenant');
    });
  });
});
