/**
 * What resend, recover and replay may queue: an account's operations are
 * admitted one at a time (a lock taken by a unique insert, so across API
 * processes), and each call queues all its deliveries or none:
 * - at most `maxPending` of the account's operation deliveries may be
 *   pending (counted in the store, so every API process sees the same);
 * - at most `perMinute` operation deliveries are queued per account per
 *   minute (a window counted in the store, written under the lock).
 * A call over either answers 429 naming the limit, with Retry-After, and
 * queues nothing. The request budget (session, API key) counts requests; this
 * counts what they queue, since one request queues up to 1,000 POSTs at
 * the subscription's host.
 */
import { randomBytes } from 'node:crypto';
import type { Collection } from 'mongodb';
import { AppError } from '#shared/errors/index.js';
import { insertDeliveries } from '#shared/mongo/delivery-queue.js';
import type { DeliveryDoc, DeliveryTrigger } from '#shared/mongo/index.js';
import type { ApiDeps } from '../../deps.js';
import type { WebhookDeps } from './service.js';
import { isDuplicateKey } from '#shared/mongo/index.js';

/** The limits (docs/decisions.md); tests lower them. */
export const operationLimits = {
  /** Operation deliveries of one account pending at once. */
  maxPending: 5000,
  /** Operation deliveries one account may queue per minute. */
  perMinute: 2000,
};

const OPERATION_TRIGGERS: DeliveryTrigger[] = ['resend', 'recover', 'replay'];
/** An admission that died holding the lock frees it after this; an admission takes well under a second. */
const LOCK_LEASE_MS = 30_000;
/** How long a call waits for the account's other admission before answering 429. */
const LOCK_WAIT_MS = 10_000;
const WINDOW_MS = 60_000;

interface LockDoc {
  _id: string;
  holder: string;
  lease_until: Date;
  expires_at: Date;
}

interface WindowDoc {
  _id: string;
  queued: number;
  expires_at: Date;
}

/** The lock and the per-minute windows live beside the operation keys (`_id` prefixes `admit:`, `opwin:`; swept by expires_at). */
function stores(deps: WebhookDeps): { locks: Collection<LockDoc>; windows: Collection<WindowDoc> } {
  const c = deps.mongo.collections.webhookOpKeys;
  return { locks: c as unknown as Collection<LockDoc>, windows: c as unknown as Collection<WindowDoc> };
}

function tooMany(message: string, detail: string, retryAfterS: number): AppError {
  return new AppError('rate_limited', message, [{ path: 'deliveries', message: detail }], { 'Retry-After': String(Math.max(1, Math.ceil(retryAfterS))) });
}

async function lock(deps: WebhookDeps, accountId: string): Promise<() => Promise<void>> {
  const { locks } = stores(deps);
  const _id = `admit:${accountId}`;
  const holder = randomBytes(12).toString('hex');
  const started = Date.now();
  for (;;) {
    const now = deps.clock();
    const lease = new Date(now.getTime() + LOCK_LEASE_MS);
    try {
      await locks.insertOne({ _id, holder, lease_until: lease, expires_at: lease });
      return async () => {
        await locks.deleteOne({ _id, holder }).catch(() => undefined); // not freed: its lease runs out
      };
    } catch (err) {
      if (!isDuplicateKey(err)) throw err;
    }
    const held = await locks.findOne({ _id });
    if (held && held.lease_until <= now) {
      await locks.deleteOne({ _id, holder: held.holder });
      continue;
    }
    if (Date.now() - started > LOCK_WAIT_MS) {
      throw tooMany('Another resend, recover or replay of this account is being queued; retry shortly', 'one operation of an account is queued at a time', 1);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Queues `docs` (all of one account's operation) if the account's limits
 * allow all of them, else none: 429. Answers the ids stored (an id already
 * there is not stored again: insertDeliveries).
 */
export async function admitAndInsert(deps: WebhookDeps & Pick<ApiDeps, 'dueWrites'>, accountId: string, docs: DeliveryDoc[]): Promise<Set<string>> {
  if (docs.length === 0) return new Set();
  const { maxPending, perMinute } = operationLimits;
  if (docs.length > maxPending) throw tooMany(`This call would queue ${docs.length} deliveries: more than the ${maxPending} pending operation deliveries an account may have`, `at most ${maxPending} pending resend, recover and replay deliveries per account`, 60);
  const release = await lock(deps, accountId);
  try {
    const now = deps.clock();
    const start = Math.floor(now.getTime() / WINDOW_MS) * WINDOW_MS;
    const { windows } = stores(deps);
    const windowId = `opwin:${accountId}:${start}`;
    const window = await windows.findOne({ _id: windowId });
    const used = window?.queued ?? 0;
    if (used + docs.length > perMinute) {
      throw tooMany(
        `Operation delivery budget exceeded: ${perMinute} resend, recover and replay deliveries per minute per account (${used} queued this minute, this call would queue ${docs.length})`,
        `at most ${perMinute} operation deliveries per minute per account`,
        (start + WINDOW_MS - now.getTime()) / 1000,
      );
    }
    const pending = await deps.mongo.collections.deliveries.countDocuments({ account_id: accountId, state: 'pending', trigger: { $in: OPERATION_TRIGGERS } });
    if (pending + docs.length > maxPending) {
      throw tooMany(
        `Too many pending operation deliveries: at most ${maxPending} resend, recover and replay deliveries of an account may be pending (${pending} pending, this call would queue ${docs.length})`,
        `at most ${maxPending} pending resend, recover and replay deliveries per account`,
        60,
      );
    }
    // Charged before the insert, under the lock: a window is written by one admission at a time.
    await windows.updateOne({ _id: windowId }, { $set: { queued: used + docs.length, expires_at: new Date(start + 2 * WINDOW_MS) } }, { upsert: true });
    const { deliveries, retryDue } = deps.mongo.collections;
    return await insertDeliveries({ deliveries, retryDue, dueWrites: deps.dueWrites }, docs);
  } finally {
    await release();
  }
}
