/**
 * Reading an account's events: cursor polling and long-poll. Transport-free
 * (the HTTP routes and the MCP tool both call these), and every input is
 * validated here, so each caller gets the same 400s.
 */
import { decodeCursor, type Position } from '../../../../shared/src/cursor.js';
import { validationFailed } from '../../../../shared/src/errors/index.js';
import { docToRecord } from '../../../../shared/src/eventlog/envelope.js';
import type { EventRecord, EventType } from '../../../../shared/src/eventlog/types.js';
import type { ApiDeps } from '../../deps.js';
import { openFeed } from '../../live/feed.js';
import { feedPorts, readTail } from '../../live/runtime.js';
import { LIST_DEFAULT_LIMIT, listEventsQuery, waitBody, type ListEventsInput, type WaitInput } from './schemas.js';
import { readAfter } from '../../event-store/store.js';
import { holdLongPoll } from './long-poll-cap.js';

interface EventPage {
  events: EventRecord[];
  /** Pass back as `since` to continue; null only when there was no `since` and no event yet. */
  cursor: string | null;
}

type WaitResult = { event: EventRecord } | { event: null; timed_out: true; cursor: string | null };

/** A cursor from the caller, checked to lie in the account's partition (all its events are there). */
export function resolveSince(deps: ApiDeps, accountId: string, raw: string, field: string): Position {
  const position = decodeCursor(raw, field);
  if (position.partition !== deps.events.producer.partitionOf(accountId)) {
    throw validationFailed([{ path: field, message: 'is not a cursor of this account' }], `${field} is not a valid cursor`);
  }
  return position;
}

/**
 * GET /api/v1/events: the account's events strictly after `since`, oldest
 * first. A cursor inside this process's tail window is answered from memory
 * (every event after it up to the fan-out's head is there); any other read
 * goes to MongoDB, up to the materializer's watermark.
 */
export async function listEvents(deps: ApiDeps, accountId: string, input: ListEventsInput | Record<string, unknown>): Promise<EventPage> {
  const q = listEventsQuery({ ...input }); // a copy: validation coerces query strings in place
  const since = q.since === undefined ? null : resolveSince(deps, accountId, q.since, 'since');
  const partition = since?.partition ?? deps.events.producer.partitionOf(accountId);
  const types = q.type ? [q.type] : null;
  const limit = q.limit ?? LIST_DEFAULT_LIMIT;
  const recent = since ? readTail(deps.events, { accountId, partition, after: since.offset, before: null, types, limit }) : null;
  if (recent) {
    // Read in the same tick as the events: the window held every event below `head`.
    const head = deps.events.tail.range(partition)!.next;
    const events = recent.map((e) => e.record);
    if (events.length < limit) events.push(...(await storedBeyondHead(deps, { accountId, partition, head, types, limit: limit - events.length })));
    return { events, cursor: events.at(-1)?.cursor ?? q.since ?? null };
  }
  const through = await deps.events.watermarks.current(partition);
  const docs = await readAfter(deps.mongo.collections.eventPages, { accountId, partition, since, through, types, limit }, deps.events.pageCache);
  const events = docs.map(docToRecord);
  return { events, cursor: events.at(-1)?.cursor ?? q.since ?? null };
}

/** A fan-out behind for less than this is about to catch up: reading MongoDB (a scan on FerretDB) would only slow the poll. */
const BEHIND_GRACE_MS = 1000;

/**
 * When this process's fan-out has been behind the materializer for a while
 * (it is catching up after a rejoin or a broker restart), MongoDB already
 * holds events at or after the window's head: they follow the window's
 * answer, so a pod does not show less than the store would for long.
 * Usually the watermark is below the head (the fan-out runs ahead of the
 * materializer), or only briefly above it, and nothing is read. Failures
 * leave the window's answer, which is complete up to the head.
 */
async function storedBeyondHead(deps: ApiDeps, q: { accountId: string; partition: number; head: bigint; types: EventType[] | null; limit: number }): Promise<EventRecord[]> {
  try {
    const through = await deps.events.watermarks.recent(q.partition);
    if (deps.events.tail.behindFor(q.partition, through >= q.head) < BEHIND_GRACE_MS) return [];
    const since = { partition: q.partition, offset: q.head - 1n };
    return (await readAfter(deps.mongo.collections.eventPages, { accountId: q.accountId, partition: q.partition, since, through, types: q.types, limit: q.limit }, deps.events.pageCache)).map(docToRecord);
  } catch (err) {
    deps.log.warn({ err, partition: q.partition }, 'could not read the events beyond the tail window from MongoDB; answering from the window');
    return [];
  }
}

/**
 * POST /api/v1/events/wait: the next matching event, or a timeout after
 * timeout_ms. With `since`, an event already after the cursor returns at
 * once. `signal` ends the wait early (client gone); shutdown ends it as a
 * timeout so clients simply loop.
 */
async function waitOnce(deps: ApiDeps, accountId: string, input: WaitInput, signal?: AbortSignal): Promise<WaitResult> {
  const q = waitBody(input); // validated here, whoever calls: the input may be anything
  const { longPollMaxMs, longPollDefaultMs, handoffTimeoutMs } = deps.config.events;
  const timeoutMs = q.timeout_ms ?? Math.min(longPollDefaultMs, longPollMaxMs);
  if (timeoutMs > longPollMaxMs) throw validationFailed([{ path: 'timeout_ms', message: `must be <= ${longPollMaxMs}` }]);
  const since = q.since === undefined ? null : resolveSince(deps, accountId, q.since, 'since');
  const deadline = Date.now() + timeoutMs;
  const feed = await openFeed(feedPorts(deps.events, deps.mongo, handoffTimeoutMs), {
    accountId,
    types: q.types && q.types.length > 0 ? q.types : null,
    since,
    pageSize: 1,
    maxQueue: { events: 16, bytes: 4 * 1024 * 1024 }, // only the first event matters
  });
  deps.metrics.openLongPolls.inc();
  try {
    const next = await feed.next(deadline - Date.now(), signal);
    if (next) return { event: next.record };
    return { event: null, timed_out: true, cursor: feed.checkedCursor() };
  } finally {
    deps.metrics.openLongPolls.dec();
    feed.close();
  }
}

/** waitForEvent within the account's long-poll cap (429 over it, long-poll-cap.ts); POST /wait and MCP wait_for_event. */
export function waitForEvent(deps: ApiDeps, accountId: string, input: WaitInput, signal?: AbortSignal): Promise<WaitResult> {
  // Not async: a held long-poll keeps one suspended frame (waitOnce's), not two.
  let release: () => void;
  try {
    release = holdLongPoll(deps, accountId);
  } catch (err) {
    return Promise.reject(err as Error);
  }
  return waitOnce(deps, accountId, input, signal).finally(release);
}
