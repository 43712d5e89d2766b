/**
 * Reading an account's events: cursor polling (long-poll: long-poll.ts). Transport-free
 * (the HTTP routes and the MCP tool both call these), and every input is
 * validated here, so each caller gets the same 400s.
 */
import { decodeCursor, type Position } from '../../../../shared/src/cursor.js';
import { validationFailed } from '../../../../shared/src/errors/index.js';
import { docToRecord } from '../../../../shared/src/eventlog/envelope.js';
import type { EventRecord, EventType } from '../../../../shared/src/eventlog/types.js';
import type { ApiDeps } from '../../deps.js';
import { readTail } from '../../live/runtime.js';
import { LIST_DEFAULT_LIMIT, listEventsQuery, type ListEventsInput } from './schemas.js';
import { readAfter } from '../../event-store/store.js';

interface EventPage {
  events: EventRecord[];
  /** Pass back as `since` to continue; null only when there was no `since` and no event yet. */
  cursor: string | null;
}

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
