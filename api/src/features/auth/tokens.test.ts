import { expect } from 'chai';
import jwt from 'jsonwebtoken';
import { issueSessionToken, secretKey, verifySessionToken } from './tokens.js';

const auth = { jwtSecret: 'unit-test-secret-0123456789abcdefghij', sessionTtlSeconds: 30 * 24 * 3600 };
const userId = 'usr_0123456789abcdef01234567';
const now = new Date('2026-01-01T00:00:00Z');
const nowSec = now.getTime() / 1000;
const claims = { sub: userId, iat: nowSec, exp: nowSec + 60, iss: 'event-platform', aud: 'session' };

function unsigned(header: object, payload: object): string {
  const part = (v: object): string => Buffer.from(JSON.stringify(v)).toString('base64url');
  return `${part(header)}.${part(payload)}.`;
}

describe('session tokens', () => {
  it('round-trips the user id', () => {
    const token = issueSessionToken(auth, userId, now);
    expect(verifySessionToken(auth, token, now)).to.equal(userId);
  });

  it('is an HS256 JWT that expires after 30 days', () => {
    const token = issueSessionToken(auth, userId, now);
    const decoded = jwt.decode(token, { complete: true })!;
    expect(decoded.header.alg).to.equal('HS256');
    const payload = decoded.payload as jwt.JwtPayload;
    expect(payload.sub).to.equal(userId);
    expect(payload.exp! - payload.iat!).to.equal(30 * 24 * 3600);
    const justBefore = new Date(now.getTime() + (30 * 24 * 3600 - 1) * 1000);
    const justAfter = new Date(now.getTime() + 30 * 24 * 3600 * 1000);
    expect(verifySessionToken(auth, token, justBefore)).to.equal(userId);
    expect(verifySessionToken(auth, token, justAfter)).to.equal(null);
  });

  it('verifies with a key object made once per secret: tokens signed with the secret string are accepted, and a change of secret takes effect', () => {
    expect(secretKey(auth.jwtSecret)).to.equal(secretKey(auth.jwtSecret));
    expect(secretKey(auth.jwtSecret).type).to.equal('secret');
    const byString = jwt.sign(claims, auth.jwtSecret, { algorithm: 'HS256' });
    expect(verifySessionToken(auth, byString, now)).to.equal(userId);
    const rotated = { ...auth, jwtSecret: 'rotated-secret-0123456789abcdefghijkl' };
    expect(verifySessionToken(rotated, byString, now)).to.equal(null);
    expect(verifySessionToken(rotated, issueSessionToken(rotated, userId, now), now)).to.equal(userId);
    expect(jwt.verify(issueSessionToken(auth, userId, now), auth.jwtSecret, { algorithms: ['HS256'], clockTimestamp: nowSec })).to.have.property('sub', userId);
  });

  it('refuses a token signed with another secret', () => {
    const token = jwt.sign(claims, 'another-secret-0123456789abcdefghijkl', { algorithm: 'HS256' });
    expect(verifySessionToken(auth, token, now)).to.equal(null);
  });

  it('refuses alg none, with or without a signature part', () => {
    expect(verifySessionToken(auth, unsigned({ alg: 'none', typ: 'JWT' }, claims), now)).to.equal(null);
    expect(verifySessionToken(auth, unsigned({ alg: 'none', typ: 'JWT' }, claims).slice(0, -1), now)).to.equal(null);
  });

  it('refuses another HMAC algorithm even with the right secret', () => {
    const token = jwt.sign(claims, auth.jwtSecret, { algorithm: 'HS512' });
    expect(verifySessionToken(auth, token, now)).to.equal(null);
  });

  it('refuses a correctly signed token meant for another audience or without expiry', () => {
    expect(verifySessionToken(auth, jwt.sign({ ...claims, aud: 'stream' }, auth.jwtSecret), now)).to.equal(null);
    expect(verifySessionToken(auth, jwt.sign({ ...claims, iss: 'someone-else' }, auth.jwtSecret), now)).to.equal(null);
    const { exp: _exp, ...noExp } = claims;
    expect(verifySessionToken(auth, jwt.sign(noExp, auth.jwtSecret), now)).to.equal(null);
  });

  it('refuses a token whose subject is not a user id', () => {
    expect(verifySessionToken(auth, jwt.sign({ ...claims, sub: 'admin' }, auth.jwtSecret), now)).to.equal(null);
  });

  it('refuses a tampered payload and garbage', () => {
    const token = issueSessionToken(auth, userId, now);
    const [h, , s] = token.split('.');
    const forged = Buffer.from(JSON.stringify({ ...claims, sub: 'usr_ffffffffffffffffffffffff' })).toString('base64url');
    expect(verifySessionToken(auth, `${h}.${forged}.${s}`, now)).to.equal(null);
    for (const junk of ['', 'garbage', 'a.b.c', 'svc_abc', '...']) expect(verifySessionToken(auth, junk, now)).to.equal(null);
  });
});
