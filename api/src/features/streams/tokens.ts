/**
 * Stream tokens: short-lived, stateless, bound to one account, usable only in
 * the stream URL. `svcst_` + base64url(JSON {a: account, exp: unix seconds,
 * n: nonce}) + "." + base64url(HMAC-SHA256 over everything before the dot),
 * keyed by a key derived from JWT_SECRET for this one purpose, so a stream
 * token can never pass as a session token or the other way round.
 */
import { createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';
import { unauthorized, type AppError } from '#shared/errors/index.js';

const STREAM_TOKEN_PREFIX = 'svcst_';
const MAX_TOKEN_LENGTH = 512;

export function deriveStreamTokenKey(jwtSecret: string): Buffer {
  return Buffer.from(hkdfSync('sha256', jwtSecret, 'event-platform', 'svcst stream token v1', 32));
}

interface MintedStreamToken {
  token: string;
  expiresAt: Date;
}

export function mintStreamToken(key: Buffer, accountId: string, now: Date, ttlSeconds: number): MintedStreamToken {
  const exp = Math.floor(now.getTime() / 1000) + ttlSeconds;
  const payload = Buffer.from(JSON.stringify({ a: accountId, exp, n: randomBytes(8).toString('base64url') })).toString('base64url');
  const signed = STREAM_TOKEN_PREFIX + payload;
  return { token: `${signed}.${sign(key, signed)}`, expiresAt: new Date(exp * 1000) };
}

/** The account a valid token is bound to; any other input is a 401 with a message that says why. */
export function verifyStreamToken(key: Buffer, raw: unknown, now: Date): string {
  if (typeof raw !== 'string' || raw === '') throw refuse('A stream token is required in the token query parameter');
  if (!raw.startsWith(STREAM_TOKEN_PREFIX)) {
    if (raw.startsWith('svc_')) throw refuse('API keys are not accepted in stream URLs; mint a stream token with POST /api/v1/events/stream-token');
    throw refuse('Only stream tokens are accepted in stream URLs; mint one with POST /api/v1/events/stream-token');
  }
  const dot = raw.lastIndexOf('.');
  if (raw.length > MAX_TOKEN_LENGTH || dot < 0) throw refuse('Invalid stream token');
  const signed = raw.slice(0, dot);
  const given = Buffer.from(raw.slice(dot + 1), 'base64url');
  const expected = Buffer.from(sign(key, signed), 'base64url');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw refuse('Invalid stream token');
  const claims = parseClaims(signed.slice(STREAM_TOKEN_PREFIX.length));
  if (!claims) throw refuse('Invalid stream token');
  if (claims.exp * 1000 <= now.getTime()) throw refuse('Stream token expired; mint a new one');
  return claims.a;
}

function sign(key: Buffer, signed: string): string {
  return createHmac('sha256', key).update(signed).digest('base64url');
}

function parseClaims(payload: string): { a: string; exp: number } | null {
  try {
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as { a?: unknown; exp?: unknown };
    if (typeof claims.a !== 'string' || claims.a === '' || typeof claims.exp !== 'number') return null;
    return { a: claims.a, exp: claims.exp };
  } catch {
    return null;
  }
}

function refuse(message: string): AppError {
  return unauthorized(message);
}
