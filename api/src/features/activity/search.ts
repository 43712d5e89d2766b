/**
 * Delivery search: the attempts of every subscription of an account, newest
 * first, filtered by outcome, HTTP status, event type, subscription and time.
 * The store is asked only for an index range: the account's attempts (or one
 * subscription's) in (at, _id) order below the cursor and within [from, to);
 * the other filters are checked here, on at most SEARCH_MAX_SCAN fetched
 * attempts per request. A page ends when it is full or when the scan bound is
 * reached, and its cursor names the last attempt examined, so the next page
 * resumes exactly there whichever API process answers it (the cursor is the
 * whole state).
 */
import type { Filter } from 'mongodb';
import { validationFailed } from '#shared/errors/index.js';
import { EVENT_TYPES } from '#shared/eventlog/types.js';
import type { AttemptDoc } from '#shared/mongo/index.js';
import type { ApiDeps } from '../../deps.js';
import type { Static } from '../../shapes.js';
import { attemptView, findOwned } from '../webhooks/index.js';
import { ATTEMPT_OUTCOMES, SEARCH_MAX_SCAN, STATUS_FILTER, type DeliverySearchQuery, type DeliverySearchSchema } from './schemas.js';

type SearchDeps = Pick<ApiDeps, 'config' | 'mongo' | 'clock' | 'resolveHost' | 'secretBox' | 'events' | 'metrics' | 'log'>;
type DeliverySearch = Static<typeof DeliverySearchSchema>;

/** Where a page stopped: the (at, _id) of the last attempt it examined. */
interface Position {
  at: number;
  id: string;
}

/** The filters checked on each fetched attempt. */
interface Matcher {
  outcomes: Set<string> | null;
  status: [number, number] | null;
  types: Set<string> | null;
}

const CURSOR = /^(\d{1,15})\.([A-Za-z0-9_-]{1,100})$/;

/** The cursor: base64url of `<at in epoch ms>.<attempt id>` (opaque to clients). */
function encodeSearchCursor(p: Position): string {
  return Buffer.from(`${p.at}.${p.id}`, 'utf8').toString('base64url');
}

function decodeSearchCursor(raw: string): Position {
  const m = CURSOR.exec(Buffer.from(raw, 'base64url').toString('utf8'));
  if (!m) throw validationFailed([{ path: 'cursor', message: 'is not a cursor this search returned (pass next_cursor as it came)' }], 'cursor: not a cursor this search returned');
  return { at: Number(m[1]), id: m[2]! };
}

function bad(path: string, message: string): never {
  throw validationFailed([{ path, message }], `${path}: ${message}`);
}

/** A comma-separated list, each value one of `allowed`; null when absent. */
function listOf(raw: string | undefined, path: string, allowed: readonly string[]): Set<string> | null {
  if (raw === undefined) return null;
  const values = raw.split(',').map((v) => v.trim());
  for (const v of values) if (!allowed.includes(v)) bad(path, `${JSON.stringify(v)} is not one of: ${allowed.join(', ')}`);
  return new Set(values);
}

/** `404` -> [404, 404]; `5xx` -> [500, 599]; `400-429` -> [400, 429]. */
function statusRange(raw: string): [number, number] {
  if (!STATUS_FILTER.test(raw)) bad('status', 'must be a status (404), a class (5xx) or an inclusive range (400-429)');
  if (raw.endsWith('xx')) {
    const base = Number(raw[0]) * 100;
    return [base, base + 99];
  }
  const [lo, hi = lo] = raw.split('-').map(Number) as [number, number?];
  if (hi! < lo) bad('status', `the range ${raw} is empty: write the lower status first`);
  return [lo, hi!];
}

function matcherOf(q: DeliverySearchQuery): Matcher {
  let outcomes = listOf(q.outcome, 'outcome', [...ATTEMPT_OUTCOMES, 'failed']);
  if (outcomes?.has('failed')) outcomes = new Set([...outcomes, ...ATTEMPT_OUTCOMES.filter((o) => o !== 'ok')]);
  return { outcomes, status: q.status === undefined ? null : statusRange(q.status), types: listOf(q.event_type, 'event_type', EVENT_TYPES) };
}

function matches(m: Matcher, doc: AttemptDoc): boolean {
  if (m.outcomes && !m.outcomes.has(doc.outcome)) return false;
  if (m.status && (doc.status === null || doc.status < m.status[0] || doc.status > m.status[1])) return false;
  return !m.types || m.types.has(doc.event_type);
}

/**
 * The store's part of the query: the account's attempts (or one of its
 * subscriptions'), at in [from, to), strictly below the cursor in (at, _id)
 * order. Served by attempts' `account_recent` (or `subscription_recent`) index.
 */
function rangeFilter(accountId: string, webhookId: string | undefined, q: DeliverySearchQuery, after: Position | null): Filter<AttemptDoc> {
  const owner: Filter<AttemptDoc> = webhookId ? { subscription_id: webhookId } : { account_id: accountId };
  const at: { $gte?: Date; $lt?: Date } = {};
  if (q.from !== undefined) at.$gte = new Date(q.from);
  if (q.to !== undefined) at.$lt = new Date(q.to);
  const clauses: Filter<AttemptDoc>[] = [];
  if (at.$gte || at.$lt) clauses.push({ at });
  if (after) clauses.push({ $or: [{ at: { $lt: new Date(after.at) } }, { at: new Date(after.at), _id: { $lt: after.id } }] });
  return clauses.length === 0 ? owner : { ...owner, $and: clauses };
}

/**
 * One page of the account's attempts that match every filter, newest first.
 * `bounds`: the tests' way to reach the scan bound without writing 1,000 attempts.
 */
export async function searchDeliveries(deps: SearchDeps, accountId: string, q: DeliverySearchQuery, bounds = { maxScan: SEARCH_MAX_SCAN }): Promise<DeliverySearch> {
  const matcher = matcherOf(q);
  const after = q.cursor === undefined ? null : decodeSearchCursor(q.cursor);
  if (q.from !== undefined && q.to !== undefined && Date.parse(q.from) >= Date.parse(q.to)) bad('to', 'must be later than from');
  if (q.webhook_id !== undefined) await findOwned(deps, accountId, q.webhook_id);
  const cursor = deps.mongo.collections.attempts
    .find(rangeFilter(accountId, q.webhook_id, q, after))
    .sort({ at: -1, _id: -1 })
    .limit(bounds.maxScan)
    .batchSize(Math.min(bounds.maxScan, Math.max(q.limit * 2, 100)));
  const attempts: DeliverySearch['attempts'] = [];
  let last: Position | null = null;
  let scanned = 0;
  try {
    for await (const doc of cursor) {
      scanned++;
      last = { at: doc.at.getTime(), id: doc._id };
      if (matches(matcher, doc)) attempts.push({ ...attemptView(doc), webhook_id: doc.subscription_id } as DeliverySearch['attempts'][number]);
      if (attempts.length === q.limit) break;
    }
  } finally {
    await cursor.close();
  }
  // More may follow when the page filled or the scan bound stopped it; the range is exhausted otherwise.
  const more = attempts.length === q.limit || scanned === bounds.maxScan;
  return { attempts, next_cursor: more && last ? encodeSearchCursor(last) : null };
}
