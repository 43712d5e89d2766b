import { createSecretKey, type KeyObject } from 'node:crypto';
import jwt from 'jsonwebtoken';
import type { ApiConfig } from '../../config.js';

/**
 * Session tokens are HS256 JWTs. Issuer and audience are checked on verify so
 * no other token signed with the same secret (now or later) passes as a
 * session; the algorithm list is pinned so `alg: none` and algorithm
 * confusion are refused.
 */
const ISSUER = 'event-platform';
const AUDIENCE = 'session';
const USER_ID_PATTERN = /^usr_[0-9a-f]{24}$/;

type AuthSettings = Pick<ApiConfig['auth'], 'jwtSecret' | 'sessionTtlSeconds'>;

const epochSeconds = (at: Date): number => Math.floor(at.getTime() / 1000);

/**
 * The secret as a KeyObject, made once per secret. Given a string,
 * jsonwebtoken first tries to parse it as a public key (createPublicKey, which
 * throws for an HMAC secret) on every sign and verify, a large share of an
 * API process's CPU when released long-polls come back with session tokens
 * (docs/performance.md, scenario 3). A KeyObject of type secret is used as it is; the
 * algorithm list stays pinned to HS256.
 */
const keys = new Map<string, KeyObject>();
export function secretKey(secret: string): KeyObject {
  let key = keys.get(secret);
  if (!key) {
    if (keys.size >= 8) keys.clear(); // a handful of secrets in one process (tests); never grows
    key = createSecretKey(Buffer.from(secret, 'utf8'));
    keys.set(secret, key);
  }
  return key;
}

export function issueSessionToken(auth: AuthSettings, userId: string, now: Date): string {
  const iat = epochSeconds(now);
  return jwt.sign({ sub: userId, iat, exp: iat + auth.sessionTtlSeconds }, secretKey(auth.jwtSecret), {
    algorithm: 'HS256',
    issuer: ISSUER,
    audience: AUDIENCE,
  });
}

/** The user id of a valid, unexpired session token; null for anything else. */
export function verifySessionToken(auth: AuthSettings, token: string, now: Date): string | null {
  try {
    const payload = jwt.verify(token, secretKey(auth.jwtSecret), {
      algorithms: ['HS256'],
      issuer: ISSUER,
      audience: AUDIENCE,
      clockTimestamp: epochSeconds(now),
    });
    if (typeof payload === 'string' || typeof payload.exp !== 'number') return null;
    return typeof payload.sub === 'string' && USER_ID_PATTERN.test(payload.sub) ? payload.sub : null;
  } catch {
    return null;
  }
}
