/**
 * End to end: events ingested through the API reach a real HTTPS receiver
 * through the delivery process, signed; pings go through the log; the
 * subscription's last_* fields and attempt list show what happened.
 */
import { expect } from 'chai';
import { verifyServiceSignature, verifyStandardWebhook } from '#shared/signing.js';
import { failTimes, hang, Receiver, status, type Received } from '#test-support/receiver.js';
import { deliveryTestEnv, startTestDelivery, waitForGroup } from '../../delivery/test/support/delivery.js';
import type { RunningApi } from '../src/server.js';
import { bearer, createAccount, type TestAccount } from './support/accounts.js';
import { call } from './support/api.js';
import { webhookApi, webhookTestEnv } from './support/webhooks.js';

describe('webhooks end to end (API, event log, delivery process, HTTPS receiver)', function () {
  this.timeout(60_000);
  let api: RunningApi;
  let receiver: Receiver;

  const ingest = async (acct: TestAccount, type: string, data: Record<string, unknown> = {}): Promise<string> => {
    const res = await call(api.url, 'POST', '/internal/v1/events', {
      headers: bearer(api.deps.config.ingestToken),
      body: { account_id: acct.userId, type, data },
    });
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    return res.body.events[0].id;
  };

  const subscribe = async (acct: TestAccount, path: string, events: string[]): Promise<{ id: string; secret: string }> => {
    const res = await call(api.url, 'POST', '/api/v1/webhooks', { headers: bearer(acct.apiKey), body: { url: receiver.url(path), events } });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return res.body;
  };

  /** Polls GET /api/v1/events until the event shows up (the materializer runs behind the log). */
  const polled = async (acct: TestAccount, eventId: string, type?: string, tries = 300): Promise<any> => {
    for (let i = 0; i < tries; i++) {
      const res = await call(api.url, 'GET', `/api/v1/events?limit=100${type ? `&type=${type}` : ''}`, { headers: bearer(acct.apiKey) });
      const found = res.body.events?.find((e: { id: string }) => e.id === eventId);
      if (found) return found;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`event ${eventId} never showed up in polling`);
  };

  const webhook = async (acct: TestAccount, id: string, until: (w: any) => boolean): Promise<any> => {
    for (let i = 0; i < 150; i++) {
      const res = await call(api.url, 'GET', `/api/v1/webhooks/${id}`, { headers: bearer(acct.apiKey) });
      if (until(res.body)) return res.body;
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`webhook ${id} never reached the expected state`);
  };

  before(async function () {
    this.timeout(120_000);
    receiver = await Receiver.start();
    ({ api } = await webhookApi());
    const env = deliveryTestEnv(receiver.caFile, webhookTestEnv());
    await startTestDelivery(env);
    await waitForGroup(env);
    // The materializer and the delivery group settle on the new topic before anything is timed.
    const probe = await createAccount(api.url);
    await polled(probe, await ingest(probe, 'call.started'), undefined, 900);
  });
  after(() => receiver.close());

  it('delivers an ingested event as the polling record, signed both ways', async () => {
    const acct = await createAccount(api.url);
    const sub = await subscribe(acct, '/e2e-signed', ['*']);
    const eventId = await ingest(acct, 'call.completed', { call_id: 'c-42', summary: 'Booked a table', sentiment: 'positive' });
    const [req] = await receiver.waitFor('/e2e-signed', 1);
    const { raw, headers } = req as Received;

    // The receiver's checks: timing-safe compare over the raw body, and the Standard Webhooks signature.
    expect(verifyServiceSignature(sub.secret, raw, headers['x-service-signature'] as string)).to.equal(true);
    expect(verifyStandardWebhook(sub.secret, raw, headers as Record<string, string>)).to.equal(true);
    expect(headers['x-service-event']).to.equal('call.completed');
    expect(headers['x-service-delivery']).to.match(/^dlv_[0-9a-f]{24}$/);
    expect(headers['webhook-id']).to.equal(headers['x-service-delivery']);
    expect(headers['content-type']).to.equal('application/json');

    const record = await polled(acct, eventId);
    expect(JSON.parse(raw.toString('utf8'))).to.deep.equal(record);
    expect(record.data).to.deep.equal({ call_id: 'c-42', summary: 'Booked a table', sentiment: 'positive' });
  });

  it('filters by type list and ["*"]', async () => {
    const acct = await createAccount(api.url);
    await subscribe(acct, '/e2e-star', ['*']);
    await subscribe(acct, '/e2e-msgs', ['message.received', 'message.sent']);
    const ids: Record<string, string> = {};
    for (const type of ['call.started', 'message.received', 'call.ended', 'message.sent']) ids[type] = await ingest(acct, type);
    await receiver.waitFor('/e2e-star', 4);
    await receiver.waitFor('/e2e-msgs', 2);
    await new Promise((r) => setTimeout(r, 1000));
    expect(receiver.received('/e2e-star').map((r) => r.body.id).sort()).to.deep.equal(Object.values(ids).sort());
    expect(receiver.received('/e2e-msgs').map((r) => r.body.id).sort()).to.deep.equal([ids['message.received'], ids['message.sent']].sort());
  });

  it('sends a ping through the log to its subscription only, visible to polling', async () => {
    const acct = await createAccount(api.url);
    const target = await subscribe(acct, '/e2e-ping-target', ['call.started']);
    await subscribe(acct, '/e2e-ping-other', ['*']);
    const res = await call(api.url, 'POST', `/api/v1/webhooks/${target.id}/ping`, { headers: bearer(acct.apiKey) });
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    expect(res.body).to.have.all.keys('event_id');

    const [req] = await receiver.waitFor('/e2e-ping-target', 1);
    expect(req!.body).to.include({ id: res.body.event_id, type: 'webhook.ping' });
    expect(req!.body.data).to.deep.equal({ subscription_id: target.id });
    expect(req!.headers['x-service-event']).to.equal('webhook.ping');
    expect(verifyServiceSignature(target.secret, req!.raw, req!.headers['x-service-signature'] as string)).to.equal(true);

    const record = await polled(acct, res.body.event_id, 'webhook.ping');
    expect(record).to.deep.equal(req!.body);
    await new Promise((r) => setTimeout(r, 1000));
    expect(receiver.received('/e2e-ping-other')).to.have.length(0);

    const stranger = await createAccount(api.url);
    expect((await call(api.url, 'POST', `/api/v1/webhooks/${target.id}/ping`, { headers: bearer(stranger.apiKey) })).status).to.equal(404);
  });

  it('shows last_status, last_delivery_at and last_error after a 200, a 500 and a hang', async () => {
    const acct = await createAccount(api.url);
    receiver.on('/e2e-500', status(500)).on('/e2e-hang', hang);
    const ok = await subscribe(acct, '/e2e-200', ['message.sent']);
    const bad = await subscribe(acct, '/e2e-500', ['message.sent']);
    const slow = await subscribe(acct, '/e2e-hang', ['message.sent']);
    const before = Date.now();
    await ingest(acct, 'message.sent', { to: '+15550100' });

    const w200 = await webhook(acct, ok.id, (w) => w.last_delivery_at !== null);
    expect(w200).to.include({ last_status: 200, last_error: null });
    expect(Date.parse(w200.last_delivery_at)).to.be.at.least(before - 1000);
    const w500 = await webhook(acct, bad.id, (w) => w.last_delivery_at !== null);
    expect(w500).to.include({ last_status: 500, last_error: null });
    const wHang = await webhook(acct, slow.id, (w) => w.last_delivery_at !== null);
    expect(wHang).to.include({ last_status: null, last_error: 'timeout' });

    const attempts = await call(api.url, 'GET', `/api/v1/webhooks/${slow.id}/deliveries`, { headers: bearer(acct.apiKey) });
    const first = attempts.body.attempts.find((a: { attempt: number }) => a.attempt === 1);
    expect(first).to.include({ status: null, outcome: 'timeout' });
    expect(first.duration_ms).to.be.within(3900, 5000);
  });

  it('retries with the same delivery id and lists every attempt, newest first', async () => {
    const acct = await createAccount(api.url);
    receiver.on('/e2e-retry', failTimes(2, 503));
    const sub = await subscribe(acct, '/e2e-retry', ['call.transcribed']);
    const eventId = await ingest(acct, 'call.transcribed', { transcript: 'hello' });
    const reqs = await receiver.waitFor('/e2e-retry', 3, 30_000);
    const ids = new Set(reqs.map((r) => r.headers['x-service-delivery']));
    expect(ids.size).to.equal(1);

    const w = await webhook(acct, sub.id, (x) => x.last_status === 200);
    expect(w.last_error).to.equal(null);
    const res = await call(api.url, 'GET', `/api/v1/webhooks/${sub.id}/deliveries`, { headers: bearer(acct.apiKey) });
    expect(res.body.attempts.map((a: any) => [a.attempt, a.status, a.outcome])).to.deep.equal([
      [3, 200, 'ok'],
      [2, 503, 'http_5xx'],
      [1, 503, 'http_5xx'],
    ]);
    expect(res.body.attempts.every((a: any) => a.event_id === eventId && a.delivery_id === [...ids][0])).to.equal(true);
  });
});
