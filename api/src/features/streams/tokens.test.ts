import { expect } from 'chai';
import { deriveStreamTokenKey, mintStreamToken, verifyStreamToken } from './tokens.js';

describe('stream tokens', () => {
  const key = deriveStreamTokenKey('x'.repeat(40));
  const now = new Date('2026-01-01T00:00:00Z');

  it('binds a token to its account for its lifetime', () => {
    const { token, expiresAt } = mintStreamToken(key, 'usr_1', now, 120);
    expect(token).to.match(/^svcst_[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
    expect(expiresAt.toISOString()).to.equal('2026-01-01T00:02:00.000Z');
    expect(verifyStreamToken(key, token, new Date(now.getTime() + 119_000))).to.equal('usr_1');
    expect(() => verifyStreamToken(key, token, new Date(now.getTime() + 120_000))).to.throw(/expired/);
  });

  it('refuses tampered tokens, other keys, API keys and JWTs', () => {
    const { token } = mintStreamToken(key, 'usr_1', now, 120);
    const [body, sig] = token.split('.') as [string, string];
    const forged = Buffer.from(JSON.stringify({ a: 'usr_2', exp: 9e9, n: 'x' })).toString('base64url');
    expect(() => verifyStreamToken(key, `svcst_${forged}.${sig}`, now)).to.throw(/Invalid/);
    expect(() => verifyStreamToken(key, `${body}.${sig.slice(0, -2)}`, now)).to.throw(/Invalid/);
    expect(() => verifyStreamToken(deriveStreamTokenKey('y'.repeat(40)), token, now)).to.throw(/Invalid/);
    expect(() => verifyStreamToken(key, 'svc_abcdef', now)).to.throw(/API keys are not accepted/);
    expect(() => verifyStreamToken(key, 'eyJhbGciOiJIUzI1NiJ9.e30.sig', now)).to.throw(/Only stream tokens/);
    expect(() => verifyStreamToken(key, '', now)).to.throw(/required/);
    expect(() => verifyStreamToken(key, undefined, now)).to.throw(/required/);
    try {
      verifyStreamToken(key, 'svcst_nope', now);
    } catch (err) {
      expect(err).to.have.property('status', 401);
    }
  });
});
