/**
 * Credentials that must be refused, built for one victim account: missing,
 * malformed, revoked, rotated, expired, tampered, of the wrong kind.
 */
import jwt from 'jsonwebtoken';
import type { RunningApi } from '../../../src/server.js';
import { bearer, createAccount, type TestAccount } from '../../support/accounts.js';
import { call } from '../../support/api.js';
import { mintStreamToken } from '../../../src/features/streams/tokens.js';

export interface BadCredential {
  label: string;
  headers: Record<string, string>;
}

const now = (): number => Math.floor(Date.now() / 1000);

function sessionClaims(sub: string): Record<string, unknown> {
  return { sub, iat: now(), exp: now() + 3600, iss: 'event-platform', aud: 'session' };
}

function flipLast(s: string): string {
  const last = s.at(-2) === 'A' ? 'B' : 'A';
  return s.slice(0, -2) + last + s.slice(-1);
}

/** The JWT family: expired, re-signed, re-algorithmed, re-targeted, mangled. */
function tamperedSessions(victim: TestAccount, secret: string): BadCredential[] {
  const [header, payload, signature] = victim.token.split('.') as [string, string, string];
  const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
  const forged = Buffer.from(JSON.stringify({ ...claims, sub: 'usr_000000000000000000000000' })).toString('base64url');
  const noneHeader = Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url');
  return [
    { label: 'expired session token', headers: bearer(jwt.sign({ ...sessionClaims(victim.userId), iat: now() - 31 * 86400, exp: now() - 60 }, secret)) },
    { label: 'session token without exp', headers: bearer(jwt.sign({ sub: victim.userId, iss: 'event-platform', aud: 'session' }, secret)) },
    { label: 'session token signed with another secret', headers: bearer(jwt.sign(sessionClaims(victim.userId), 'another-secret-that-is-long-enough-0000')) },
    { label: 'session token as HS512 with the right secret', headers: bearer(jwt.sign(sessionClaims(victim.userId), secret, { algorithm: 'HS512' })) },
    { label: 'session token with alg none', headers: bearer(`${noneHeader}.${payload}.`) },
    { label: 'session token for another audience', headers: bearer(jwt.sign({ ...sessionClaims(victim.userId), aud: 'stream' }, secret)) },
    { label: 'session token from another issuer', headers: bearer(jwt.sign({ ...sessionClaims(victim.userId), iss: 'someone-else' }, secret)) },
    { label: 'session token with a flipped signature', headers: bearer(`${header}.${payload}.${flipLast(signature)}`) },
    { label: 'session token with a swapped payload', headers: bearer(`${header}.${forged}.${signature}`) },
    { label: 'session token cut short', headers: bearer(`${header}.${payload}`) },
    { label: 'session token for an account that does not exist', headers: bearer(jwt.sign(sessionClaims('usr_000000000000000000000000'), secret)) },
  ];
}

function malformed(victim: TestAccount): BadCredential[] {
  return [
    { label: 'no credential', headers: {} },
    { label: 'empty Authorization', headers: { authorization: '' } },
    { label: 'Bearer without a token', headers: { authorization: 'Bearer' } },
    { label: 'Basic scheme', headers: { authorization: `Basic ${Buffer.from(`${victim.email}:${victim.password}`).toString('base64')}` } },
    { label: 'Token scheme with the API key', headers: { authorization: `Token ${victim.apiKey}` } },
    { label: 'two tokens in Bearer', headers: { authorization: `Bearer ${victim.apiKey} ${victim.token}` } },
    { label: 'API key with a character changed', headers: bearer(flipLast(victim.apiKey)) },
    { label: 'API key cut short', headers: bearer(victim.apiKey.slice(0, -1)) },
    { label: 'API key prefix only', headers: bearer('svc_') },
    { label: 'session token in X-API-Key', headers: { 'x-api-key': victim.token } },
    { label: 'two different credentials', headers: { ...bearer(victim.token), 'x-api-key': 'svc_' + 'A'.repeat(43) } },
    { label: 'credential of 5,000 characters', headers: bearer('svc_' + 'A'.repeat(5000)) },
  ];
}

/**
 * Every refused credential for one victim account (created here, on `api`).
 * `streamToken` mints a real stream token of the victim when the event log is
 * present; otherwise a well-formed fake is used (the prefix alone is refused).
 */
export async function badCredentials(api: RunningApi, streamToken?: (victim: TestAccount) => Promise<string>): Promise<{ victim: TestAccount; creds: BadCredential[] }> {
  const secret = api.deps.config.auth.jwtSecret;
  const victim = await createAccount(api.url);

  // A revoked key, and a key made stale by rotation, each of its own account.
  const revokedOwner = await createAccount(api.url);
  const revoked = await call(api.url, 'DELETE', '/api/auth/api-key', { headers: bearer(revokedOwner.token) });
  if (revoked.status !== 204) throw new Error(`revoke failed: ${revoked.status}`);
  const rotatedOwner = await createAccount(api.url);
  const rotated = await call(api.url, 'POST', '/api/auth/api-key', { headers: bearer(rotatedOwner.token) });
  if (rotated.status !== 201) throw new Error(`rotate failed: ${rotated.status}`);

  const stream = streamToken ? await streamToken(victim) : 'svcst_eyJhIjoidXNyXzAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMCIsImV4cCI6OTk5OTk5OTk5OX0.AAAA';
  const creds: BadCredential[] = [
    ...malformed(victim),
    ...tamperedSessions(victim, secret),
    { label: 'revoked API key', headers: bearer(revokedOwner.apiKey) },
    { label: 'revoked API key in X-API-Key', headers: { 'x-api-key': revokedOwner.apiKey } },
    { label: 'rotated (old) API key', headers: bearer(rotatedOwner.apiKey) },
    { label: 'rotated (old) API key in X-API-Key', headers: { 'x-api-key': rotatedOwner.apiKey } },
    { label: 'stream token as Bearer', headers: bearer(stream) },
    { label: 'stream token in X-API-Key', headers: { 'x-api-key': stream } },
  ];
  return { victim, creds };
}

/** Values of the stream URL's `token` parameter that must be refused (null: no parameter at all). */
export function badStreamTokens(api: RunningApi, victim: TestAccount): { label: string; token: string | null }[] {
  const key = api.deps.streams.tokenKey;
  const ttl = api.deps.config.streams.tokenTtlSeconds;
  const live = mintStreamToken(key, victim.userId, new Date(), ttl).token;
  const expired = mintStreamToken(key, victim.userId, new Date(Date.now() - (ttl + 5) * 1000), ttl).token;
  const foreignKey = mintStreamToken(Buffer.alloc(32, 7), victim.userId, new Date(), ttl).token;
  const [signed, signature] = live.split('.') as [string, string];
  const otherAccount = mintStreamToken(key, 'usr_000000000000000000000000', new Date(), ttl).token.split('.')[0]!;
  return [
    { label: 'no token parameter', token: null },
    { label: 'empty token', token: '' },
    { label: 'API key in the stream URL', token: victim.apiKey },
    { label: 'session token in the stream URL', token: victim.token },
    { label: 'expired stream token', token: expired },
    { label: 'stream token signed with another key', token: foreignKey },
    { label: 'stream token with a flipped signature', token: `${signed}.${flipLast(signature)}` },
    { label: 'stream token with its payload swapped for another account', token: `${otherAccount}.${signature}` },
    { label: 'stream token without its signature', token: signed },
    { label: 'stream token prefix only', token: 'svcst_' },
    { label: 'stream token of 5,000 characters', token: `svcst_${'A'.repeat(5000)}.${signature}` },
  ];
}
