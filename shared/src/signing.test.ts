import { createHmac } from 'node:crypto';
import { expect } from 'chai';
import { SecretBox } from './secrets.js';
import { newWebhookSecret, signDelivery, verifyServiceSignature, verifyStandardWebhook } from './signing.js';

describe('webhook signing', () => {
  const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
  const body = '{"id":"evt_1","type":"webhook.ping"}';
  const now = new Date('2026-01-02T03:04:05Z');

  it('makes a 32-byte whsec_ secret', () => {
    const s = newWebhookSecret();
    expect(s).to.match(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(s.slice(6), 'base64')).to.have.length(32);
    expect(newWebhookSecret()).to.not.equal(s);
  });

  it('X-Service-Signature is sha256= hex HMAC of the raw body keyed with the whole secret string', () => {
    const h = signDelivery(secret, 'dlv_1', body, now);
    const expected = 'sha256=' + createHmac('sha256', secret).update(body).digest('hex');
    expect(h['X-Service-Signature']).to.equal(expected);
    expect(verifyServiceSignature(secret, body, h['X-Service-Signature'])).to.equal(true);
    expect(verifyServiceSignature(secret, body + ' ', h['X-Service-Signature'])).to.equal(false);
    expect(verifyServiceSignature('whsec_other', body, h['X-Service-Signature'])).to.equal(false);
    expect(verifyServiceSignature(secret, body, undefined)).to.equal(false);
  });

  it('matches the Standard Webhooks reference vector', () => {
    // The example from the Standard Webhooks specification.
    const h = signDelivery(
      secret,
      'msg_p5jXN8AQM9LWM0D4loKWxJek',
      '{"test": 2432232314}',
      new Date(1614265330 * 1000),
    );
    expect(h['webhook-timestamp']).to.equal('1614265330');
    expect(h['webhook-signature']).to.equal('v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=');
  });

  it('verifies Standard Webhooks headers and refuses replays outside the window', () => {
    const h = signDelivery(secret, 'dlv_2', body, now);
    expect(verifyStandardWebhook(secret, body, h, { now })).to.equal(true);
    expect(verifyStandardWebhook(secret, body, { ...h, 'webhook-signature': `v1,bogus ${h['webhook-signature']}` }, { now })).to.equal(true);
    expect(verifyStandardWebhook(secret, body, { ...h, 'webhook-id': 'dlv_3' }, { now })).to.equal(false);
    const later = new Date(now.getTime() + 301_000);
    expect(verifyStandardWebhook(secret, body, h, { now: later })).to.equal(false);
  });
});

describe('webhook signing during a secret rotation', () => {
  const current = newWebhookSecret();
  const previous = newWebhookSecret();
  const body = '{"id":"evt_9","type":"call.started"}';
  const now = new Date('2026-03-04T05:06:07Z');

  it('lists one v1 signature per secret, current first, and signs X-Service-Signature with the current one only', () => {
    const h = signDelivery([current, previous], 'dlv_9', body, now);
    const sigs = h['webhook-signature'].split(' ');
    expect(sigs).to.have.length(2);
    expect(sigs[0]).to.equal(signDelivery(current, 'dlv_9', body, now)['webhook-signature']);
    expect(sigs[1]).to.equal(signDelivery(previous, 'dlv_9', body, now)['webhook-signature']);
    for (const s of [current, previous]) expect(verifyStandardWebhook(s, body, h, { now })).to.equal(true);
    expect(verifyStandardWebhook(newWebhookSecret(), body, h, { now })).to.equal(false);
    expect(verifyServiceSignature(current, body, h['X-Service-Signature'])).to.equal(true);
    expect(verifyServiceSignature(previous, body, h['X-Service-Signature'])).to.equal(false);
  });

  it('signs with one secret alike whether given alone or as a list of one', () => {
    expect(signDelivery([current], 'dlv_9', body, now)).to.deep.equal(signDelivery(current, 'dlv_9', body, now));
    expect(() => signDelivery([], 'dlv_9', body, now)).to.throw(/at least one secret/);
  });
});

describe('secret box', () => {
  const box = new SecretBox(Buffer.alloc(32, 7));

  it('round-trips and never stores the plaintext', () => {
    const sealed = box.seal('whsec_abc', 'wh_1');
    expect(sealed).to.match(/^v1\./).and.not.include('whsec_abc');
    expect(box.open(sealed, 'wh_1')).to.equal('whsec_abc');
    expect(box.seal('whsec_abc', 'wh_1')).to.not.equal(sealed); // fresh IV each time
  });

  it('refuses a ciphertext moved to another record or sealed under another key', () => {
    const sealed = box.seal('whsec_abc', 'wh_1');
    expect(() => box.open(sealed, 'wh_2')).to.throw();
    expect(() => new SecretBox(Buffer.alloc(32, 8)).open(sealed, 'wh_1')).to.throw();
  });
});
