/**
 * Idempotency keys of the webhook operations (resend, recover, replay): an
 * `Idempotency-Key` header makes a repeat of the same call within 24 h answer
 * the first call's answer and queue nothing again.
 *
 * A key is scoped to the account and the operation: its record's `_id` is
 * `<account>:<operation>:<sha256 of the key>`, taken by a unique insert
 * (atomic on FerretDB as on MongoDB; a conditional update is not on FerretDB
 * 1.x), so of two pods given the same key at once exactly one runs the
 * operation. The other (and any repeat while the first still runs) gets 409
 * with Retry-After; a repeat after it finished gets its answer
 * (`Idempotent-Replayed: true`). The same key with another request (another
 * subscription, delivery or body) is refused with 409, as for ingest keys
 * (features/ingest/idempotency.ts, whose checks of the header this reuses).
 *
 * The delivery ids resend and replay queue are derived from the key's record
 * id (`seed`; recover's from the failed deliveries, whatever the key:
 * operations.ts), so an operation run again after its first run died half-way
 * (its lease ran out) inserts the same ids: what the first run queued is not
 * queued twice (insertDeliveries keeps the existing document).
 */
import { runPeriodically } from '#shared/periodic.js';
import { createHash, randomBytes } from 'node:crypto';
import { MongoServerError } from 'mongodb';
import { AppError } from '#shared/errors/index.js';
import type { Mongo, WebhookOpKeyDoc } from '#shared/mongo/index.js';

/** What the keys need (deps.ts starts the sweeper, so nothing here imports the API's deps). */
interface OpKeyDeps {
  mongo: Pick<Mongo, 'collections'>;
  clock: () => Date;
}

export const OP_KEY_TTL_MS = 24 * 60 * 60 * 1000;
/** A running operation holds its key this long; one that died frees it after that. Operations are bounded (seconds). */
const OP_KEY_LEASE_MS = 60_000;
const MAX_KEY_LENGTH = 255;

type OpName = WebhookOpKeyDoc['op'];

interface OpOutcome<T> {
  result: T;
  /** true: the answer of an earlier call with the same key; nothing was queued now. */
  replayed: boolean;
}

/** The header's value, checked: 1 to 255 visible ASCII characters (as for ingest). */
export function checkOpKey(raw: string | string[] | undefined): string | undefined {
  if (raw === undefined) return undefined;
  const key = Array.isArray(raw) ? raw.join(',') : raw;
  if (key.length === 0 || key.length > MAX_KEY_LENGTH || !/^[\x21-\x7e]+$/.test(key)) {
    throw new AppError('validation_failed', 'Request validation failed', [{ path: 'Idempotency-Key', message: `must be 1 to ${MAX_KEY_LENGTH} visible ASCII characters` }]);
  }
  return key;
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/** The record id of a key: the account and the operation scope it. */
export function opKeyId(accountId: string, op: OpName, key: string): string {
  return `${accountId}:${op}:${sha256(key)}`;
}

const DUPLICATE_KEY = 11000;

/**
 * Runs `run(seed)` once per key: without a key, every call runs (with a
 * random seed). `request` is what the key is bound to (the path's ids and
 * the body): the same key with another request is a 409.
 */
export async function runOnce<T extends object>(
  deps: OpKeyDeps,
  scope: { accountId: string; op: OpName; key: string | undefined; request: unknown },
  run: (seed: string) => Promise<T>,
): Promise<OpOutcome<T>> {
  if (scope.key === undefined) return { result: await run(randomBytes(16).toString('hex')), replayed: false };
  const keys = deps.mongo.collections.webhookOpKeys;
  const _id = opKeyId(scope.accountId, scope.op, scope.key);
  const bodyHash = sha256(JSON.stringify(scope.request));
  for (let round = 0; round < 5; round++) {
    const now = deps.clock();
    const fresh: WebhookOpKeyDoc = {
      _id,
      account_id: scope.accountId,
      op: scope.op,
      body_hash: bodyHash,
      state: 'pending',
      lease_until: new Date(now.getTime() + OP_KEY_LEASE_MS),
      response: null,
      created_at: now,
      expires_at: new Date(now.getTime() + OP_KEY_TTL_MS),
    };
    try {
      await keys.insertOne(fresh);
    } catch (err) {
      if (!(err instanceof MongoServerError && err.code === DUPLICATE_KEY)) throw err;
      const existing = await keys.findOne({ _id });
      if (!existing) continue; // expired and swept meanwhile
      if (existing.expires_at <= now) {
        await keys.deleteOne({ _id, created_at: existing.created_at });
        continue;
      }
      if (existing.body_hash !== bodyHash) throw reused();
      if (existing.state === 'done' && existing.response) return { result: existing.response as T, replayed: true };
      if (existing.lease_until > now) throw inProgress(existing.lease_until.getTime() - now.getTime());
      // Its call died holding it: free it (only that holder's record) and take it by insert.
      await keys.deleteOne({ _id, lease_until: existing.lease_until, state: 'pending' });
      continue;
    }
    let result: T;
    try {
      result = await run(_id);
    } catch (err) {
      // Not done: a repeat runs it again, with the same seed (so the same delivery ids).
      await keys.deleteOne({ _id, state: 'pending' }).catch(() => undefined);
      throw err;
    }
    await keys.updateOne({ _id }, { $set: { state: 'done', response: result as Record<string, unknown>, lease_until: deps.clock() } });
    return { result, replayed: false };
  }
  throw inProgress(1000);
}

function reused(): AppError {
  return new AppError('conflict', 'This idempotency key was already used for a different request; use a new key for a new request', [
    { path: 'Idempotency-Key', message: 'already used with another subscription, delivery or body (keys are kept 24 hours)' },
  ]);
}

function inProgress(retryInMs: number): AppError {
  return new AppError('conflict', 'A request with this idempotency key is still being processed; retry shortly', [{ path: 'Idempotency-Key', message: 'in progress' }], {
    'Retry-After': String(Math.max(1, Math.ceil(retryInMs / 1000))),
  });
}

/** Removes keys past their 24 h where the server has no TTL index (FerretDB); readers check expires_at anyway. */
export function startOpKeySweeper(deps: Pick<OpKeyDeps, 'mongo'>, log: { warn: (o: object, m: string) => void }, intervalMs = 10 * 60_000): () => void {
  return runPeriodically(
    intervalMs,
    () => {
      deps.mongo.collections.webhookOpKeys
        .deleteMany({ expires_at: { $lt: new Date() } })
        .catch((err: unknown) => log.warn({ err }, 'could not sweep expired webhook operation idempotency keys; will try again'));
    },
    0.2,
  );
}
