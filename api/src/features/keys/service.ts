import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { notFound } from '#shared/errors/index.js';
import type { ApiKeyDoc } from '#shared/mongo/index.js';
import type { ApiDeps } from '../../deps.js';
import type { AuthContext } from '../../auth-context.js';
import type { RateState } from '../limits/index.js';
import type { NewApiKey } from './schemas.js';

const API_KEY_PREFIX = 'svc_';
/** `svc_` + 32 random bytes in base64url (43 characters, no padding). */
const API_KEY_SHAPE = /^svc_[A-Za-z0-9_-]{43}$/;

const hashApiKey = (raw: string): string => createHash('sha256').update(raw, 'utf8').digest('hex');

/** `svc_…` + the last 8 characters, as the dashboard shows it (docs/spec.md). */
const keyPreview = (raw: string): string => `${API_KEY_PREFIX}…${raw.slice(-8)}`;

export const looksLikeApiKey = (value: string): boolean => value.startsWith(API_KEY_PREFIX);

export async function findKeyDoc(deps: ApiDeps, userId: string): Promise<ApiKeyDoc | null> {
  return deps.mongo.collections.apiKeys.findOne({ _id: userId });
}

/**
 * Creates the account's key, or rotates it. The account's key document is the
 * authority and one atomic upsert replaces its hash; the pointer from the new
 * hash to the account is written first and the old hash's pointer removed
 * after (see ApiKeyHashDoc). The change is marked before and published after
 * (cache.ts): this returns once every live process has dropped its cached
 * keys, so the old key is refused everywhere from then on. The raw key exists
 * only in the returned value.
 */
export async function createOrRotateKey(deps: ApiDeps, userId: string): Promise<NewApiKey> {
  const raw = API_KEY_PREFIX + randomBytes(32).toString('base64url');
  const doc: Omit<ApiKeyDoc, '_id'> = { hash: hashApiKey(raw), preview: keyPreview(raw), created_at: deps.clock() };
  const { apiKeys, apiKeyHashes } = deps.mongo.collections;
  // A first key replaces nothing any cache could hold: only a rotation is marked and published.
  const change = (await apiKeys.findOne({ _id: userId }, { projection: { _id: 1 } })) ? await deps.keyCache.beginChange() : null;
  await apiKeyHashes.insertOne({ _id: doc.hash, account_id: userId, created_at: doc.created_at });
  const before = await apiKeys.findOneAndUpdate({ _id: userId }, { $set: doc }, { upsert: true, returnDocument: 'before' });
  if (before) await apiKeyHashes.deleteOne({ _id: before.hash });
  if (change || before) await deps.keyCache.publishChange(change);
  return { api_key: raw, preview: doc.preview, created_at: doc.created_at.toISOString() };
}

/** Revokes the account's key, on every process by the time this returns; 404 when it has none. */
export async function revokeKey(deps: ApiDeps, userId: string): Promise<void> {
  const { apiKeys, apiKeyHashes } = deps.mongo.collections;
  const change = await deps.keyCache.beginChange();
  const revoked = await apiKeys.findOneAndDelete({ _id: userId });
  if (revoked) await apiKeyHashes.deleteOne({ _id: revoked.hash });
  await deps.keyCache.publishChange(change);
  if (!revoked) throw notFound('API key');
}

/**
 * The account a raw platform API key belongs to, or null when it is not a
 * current key. A key this process confirmed recently is answered from its
 * key cache (no store operation; cache.ts keeps it exact across rotations
 * and revocations). Otherwise: the hash's pointer gives the account (an
 * `_id` lookup), and the account's key document must still hold that hash (a
 * second `_id` lookup). Does not apply the rate limit: callers follow with
 * consumeApiKeyRate.
 */
export async function resolveApiKey(deps: ApiDeps, rawKey: string): Promise<AuthContext | null> {
  if (!API_KEY_SHAPE.test(rawKey)) return null;
  const hash = hashApiKey(rawKey);
  const cached = deps.keyCache.get(hash);
  if (cached !== undefined) return { accountId: cached, userId: cached, via: 'api_key' };
  const token = deps.keyCache.fillToken();
  const { apiKeys, apiKeyHashes } = deps.mongo.collections;
  const pointer = await apiKeyHashes.findOne({ _id: hash });
  const doc = pointer ? await apiKeys.findOne({ _id: pointer.account_id }) : null;
  // The lookups matched by equality already; compare again in constant time as a matter of rule.
  if (!doc) return null;
  const stored = Buffer.from(doc.hash, 'hex');
  const given = Buffer.from(hash, 'hex');
  if (stored.length !== given.length || !timingSafeEqual(stored, given)) return null;
  deps.keyCache.fill(hash, doc._id, token);
  return { accountId: doc._id, userId: doc._id, via: 'api_key' };
}

/**
 * Counts one request against the key's budget (API_KEY_LIMIT_PER_MINUTE,
 * 100 by default), shared by every process. The budget belongs to the
 * account's key slot, so rotating does not refill it. Throws 429 (with
 * Retry-After and RateLimit-*) when spent, 503 when MongoDB is unreachable.
 */
export function consumeApiKeyRate(deps: ApiDeps, auth: AuthContext): Promise<RateState> {
  return deps.limits.apiKey.consume(auth.accountId);
}
