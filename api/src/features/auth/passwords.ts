import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import type { PasswordHash } from '../../../../shared/src/mongo/index.js';

/** OWASP's scrypt floor; stored beside each hash so it can be raised later. */
export const SCRYPT_PARAMS = { N: 16384, r: 8, p: 1, keylen: 64 } as const;
const SALT_BYTES = 16;

function derive(password: string, salt: Buffer, params: { N: number; r: number; p: number; keylen: number }): Promise<Buffer> {
  // scrypt needs about 128 * N * r bytes; leave headroom over Node's 32 MB default for higher N.
  const options: ScryptOptions = { N: params.N, r: params.r, p: params.p, maxmem: 256 * params.N * params.r + 1024 * 1024 };
  // NFC so the same password typed on different systems derives the same key.
  const input = password.normalize('NFC');
  return new Promise((resolve, reject) => {
    scrypt(input, salt, params.keylen, options, (err, key) => (err ? reject(err) : resolve(key)));
  });
}

export async function hashPassword(password: string): Promise<PasswordHash> {
  const salt = randomBytes(SALT_BYTES);
  const key = await derive(password, salt, SCRYPT_PARAMS);
  return { algo: 'scrypt', salt: salt.toString('base64'), hash: key.toString('base64'), ...SCRYPT_PARAMS };
}

export async function verifyPassword(password: string, stored: PasswordHash): Promise<boolean> {
  if (stored.algo !== 'scrypt') return false;
  const expected = Buffer.from(stored.hash, 'base64');
  const actual = await derive(password, Buffer.from(stored.salt, 'base64'), stored);
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

let dummy: Promise<PasswordHash> | null = null;

/**
 * Spends the same work as checking a real password, for a login whose email
 * is unknown: without it the fast "no such user" answer would tell an
 * attacker which emails have accounts.
 */
export async function verifyAgainstDummy(password: string): Promise<false> {
  dummy ??= hashPassword(randomBytes(16).toString('hex'));
  await verifyPassword(password, await dummy);
  return false;
}
