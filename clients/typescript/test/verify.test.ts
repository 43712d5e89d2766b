import { expect } from 'chai';
import { newWebhookSecret, signDelivery as signedByService, standardSignature } from '../../../shared/src/signing.js';
import { signDelivery, verifyWebhook, WebhookVerificationError } from '../src/index.js';

/** The service's own signer, as a plain header record. */
const serviceSignDelivery = (secret: string, id: string, raw: string, at: Date): Record<string, string> => ({ ...signedByService(secret, id, raw, at) });

const body = JSON.stringify({ id: 'evt_0123456789abcdef01234567', type: 'call.ended', created_at: '2026-03-01T10:05:12.101Z', data: { call_id: 'c1' }, cursor: 'c1_NS4xMjc' });

function fails(fn: () => unknown, reason: string): void {
  expect(fn).to.throw(WebhookVerificationError).with.property('reason', reason);
}

describe('client: verifyWebhook', () => {
  const secret = newWebhookSecret();
  let now: Date;
  beforeEach(() => {
    now = new Date(); // verifyWebhook compares with the clock when it runs
  });

  it('accepts the headers the service signs with (shared/src/signing.ts), as a plain object or a Headers', () => {
    const headers = { ...serviceSignDelivery(secret, 'dlv_1', body, now), 'Content-Type': 'application/json' };
    expect(verifyWebhook(body, headers, secret)).to.deep.equal(JSON.parse(body));
    expect(verifyWebhook(Buffer.from(body), new Headers(headers), secret).id).to.equal('evt_0123456789abcdef01234567');
    // Node's lower-cased IncomingHttpHeaders.
    const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
    expect(verifyWebhook(body, lower, secret).type).to.equal('call.ended');
  });

  it('its own signer (used by `listen`) produces what the service produces', () => {
    expect(signDelivery(secret, 'dlv_1', body, now)).to.deep.equal(serviceSignDelivery(secret, 'dlv_1', body, now));
  });

  it('accepts any one of several space-separated v1 signatures (a secret rotation), and a list of secrets', () => {
    const old = newWebhookSecret();
    const ts = Math.floor(now.getTime() / 1000);
    const headers = {
      'webhook-id': 'dlv_2',
      'webhook-timestamp': String(ts),
      'webhook-signature': `${standardSignature(secret, 'dlv_2', ts, body)} ${standardSignature(old, 'dlv_2', ts, body)}`,
      'X-Service-Signature': serviceSignDelivery(secret, 'dlv_2', body, now)['X-Service-Signature'],
    };
    expect(verifyWebhook(body, headers, secret).id).to.match(/^evt_/);
    expect(verifyWebhook(body, headers, old).id, 'a receiver still holding the old secret').to.match(/^evt_/);
    expect(verifyWebhook(body, headers, [newWebhookSecret(), old]).id).to.match(/^evt_/);
    fails(() => verifyWebhook(body, headers, newWebhookSecret()), 'no_matching_signature');
    // Other versions' signatures are ignored, not matched.
    fails(() => verifyWebhook(body, { ...headers, 'webhook-signature': `v2,${standardSignature(secret, 'dlv_2', ts, body).slice(3)}` }, secret), 'no_matching_signature');
  });

  it('refuses old and future timestamps (5 minutes by default, settable)', () => {
    const old = serviceSignDelivery(secret, 'dlv_3', body, new Date(now.getTime() - 301_000));
    fails(() => verifyWebhook(body, old, secret), 'timestamp_too_old');
    expect(verifyWebhook(body, old, secret, { toleranceSeconds: 600 }).id).to.match(/^evt_/);
    fails(() => verifyWebhook(body, serviceSignDelivery(secret, 'dlv_3', body, new Date(now.getTime() + 301_000)), secret), 'timestamp_in_future');
    fails(() => verifyWebhook(body, { ...serviceSignDelivery(secret, 'dlv_3', body, now), 'webhook-timestamp': 'yesterday' }, secret), 'bad_timestamp');
  });

  it('refuses a changed body, id or timestamp, and a replay whose timestamp was refreshed', () => {
    const headers = serviceSignDelivery(secret, 'dlv_4', body, new Date(now.getTime() - 3_600_000));
    fails(() => verifyWebhook(body.replace('c1', 'c2'), serviceSignDelivery(secret, 'dlv_4', body, now), secret), 'no_matching_signature');
    fails(() => verifyWebhook(body, { ...serviceSignDelivery(secret, 'dlv_4', body, now), 'webhook-id': 'dlv_5' }, secret), 'no_matching_signature');
    // An old delivery replayed with a fresh timestamp: X-Service-Signature still matches, the timestamped signature does not.
    fails(() => verifyWebhook(body, { ...headers, 'webhook-timestamp': String(Math.floor(now.getTime() / 1000)) }, secret), 'no_matching_signature');
  });

  it('X-Service-Signature alone: accepted only with allowUntimestamped (stripping the timestamped headers is no way around the replay check)', () => {
    const only = { 'X-Service-Signature': serviceSignDelivery(secret, 'dlv_6', body, now)['X-Service-Signature'] };
    fails(() => verifyWebhook(body, only, secret), 'untimestamped');
    expect(verifyWebhook(body, only, secret, { allowUntimestamped: true }).id).to.match(/^evt_/);
    fails(() => verifyWebhook(body, only, newWebhookSecret(), { allowUntimestamped: true }), 'no_matching_signature');
    fails(() => verifyWebhook(body, {}, secret), 'missing_signature');
    const partial = serviceSignDelivery(secret, 'dlv_6', body, now);
    delete partial['webhook-id'];
    fails(() => verifyWebhook(body, partial, secret), 'missing_signature');
    expect(() => verifyWebhook(body, only, '')).to.throw(TypeError);
  });
});
