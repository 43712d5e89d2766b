/**
 * Reading an account's events: cursor polling (long-poll: long-poll.ts). Transport-free
 * (the HTTP routes and the MCP tool both call these), and every input is
 * validated here, so each caller gets the same 400s.
 */
import { withTimeout } from '#shared/timeout.js';
import { decodeCursor, encodeCursor, type Position } from '#shared/cursor.js';
import { cursorExpired, unavailable, validationFailed } from '#shared/errors/index.js';
import { docToRecord } from '#shared/eventlog/envelope.js';
import type { EventRecord, EventType } from '#shared/eventlog/types.js';
import type { ApiDeps } from '../../deps.js';
import { readTail } from '../../live/runtime.js';
import { LIST_DEFAULT_LIMIT, listEventsQuery, type ListEventsInput } from './schemas.js';
import { readAfter, readEventAt } from '../../event-store/store.js';
import { isWholeEventDoc } from '#shared/mongo/documents.js';
import { floorCacheOf } from '../../event-store/retention.js';

/** What a read of the event history needs. */
type EventReadDeps = Pick<ApiDeps, 'config' | 'mongo' | 'events' | 'log'>;

interface EventPage {
  events: EventRecord[];
  /** Pass back as `since` to continue; null only when there was no `since` and no event yet. */
  cursor: string | null;
}

/**
 * The read's lower bound once checked against the retention (event-store/retention.ts):
 * a cursor below the oldest event kept answers 410 cursor_expired with the
 * oldest cursor still available (never a read that silently starts later);
 * no cursor starts at the oldest event kept.
 */
export async function retainedAfter(deps: ApiDeps, partition: number, since: Position | null, field = 'since'): Promise<bigint> {
  const floor = BigInt(await floorCacheOf(deps.mongo.collections.eventPages).floor(partition));
  if (since === null) return floor > 0n ? floor - 1n : -1n;
  if (since.offset < floor - 1n) throw cursorExpired(field, encodeCursor({ partition, offset: floor - 1n }));
  return since.offset;
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
 * GET /api/v1/events: the account's events strictly after `since` (or from
 * the oldest), oldest first. The read notes the log's head H of the account's
 * partition when it starts (Kafka's end offset, so an acknowledgement on any
 * pod counts) and answers only from sources complete up to H: the tail window
 * when this process's fan-out has dispatched up to H and the window covers
 * the cursor; MongoDB up to the materializer's watermark W when W >= H - 1;
 * or MongoDB up to W followed by the window from W when the window covers W.
 * Until one of those holds it waits (the fan-out or the materializer catching
 * up), and after HANDOFF_TIMEOUT_MS answers 503 with Retry-After: never a page
 * that silently leaves out an event acknowledged before the read began.
 * A page that fills up (`limit`) before H is complete as it is.
 */
export async function listEvents(deps: ApiDeps, accountId: string, input: ListEventsInput | Record<string, unknown>): Promise<EventPage> {
  const q = listEventsQuery({ ...input }); // a copy: validation coerces query strings in place
  const since = q.since === undefined ? null : resolveSince(deps, accountId, q.since, 'since');
  const partition = since?.partition ?? deps.events.producer.partitionOf(accountId);
  const read: PageRead = {
    accountId,
    partition,
    after: await retainedAfter(deps, partition, since),
    types: q.type ? [q.type] : null,
    limit: q.limit ?? LIST_DEFAULT_LIMIT,
  };
  const deadline = Date.now() + deps.config.events.handoffTimeoutMs;
  // A dormant fan-out wakes for the next reads; this one needs neither it nor its window (MongoDB answers).
  void deps.events.fanout.awake().catch((err: unknown) => deps.log.warn({ err }, 'the fan-out could not wake'));
  const head = await headOf(deps, read.partition, deadline);
  let again = false;
  for (;;) {
    const events = await readThrough(deps, read, head, again);
    if (events) return { events, cursor: events.at(-1)?.cursor ?? q.since ?? null };
    // The first attempt may have left MongoDB out: the second, one poll interval later, reads it whatever happened.
    if (!(await caughtUp(deps, read, head, deadline, !again))) throw unavailable('Event history', 2);
    again = true;
  }
}

/**
 * One event of the account by its id, read after its acknowledgement as any
 * read is: from MongoDB, or, for an event acknowledged but not yet
 * materialized, from this process's tail window, by the same handoff as
 * listEvents (the store through the watermark W, read after W; the window
 * after W, once the fan-out reached the head H noted at the start). Null when
 * neither holds it (an unknown id, another account's, or expired); 503 when
 * neither source catches up within HANDOFF_TIMEOUT_MS. In MongoDB the id's
 * document (the events collection, by `_id`) says where the event is, and
 * the event is read from the account's stream at that offset once W reached
 * it (the stream may not hold it before); above W it is waited for as an
 * event not stored yet. A document written before the streams held the only
 * copy holds the whole event and is answered as it is.
 */
export async function findEvent(deps: EventReadDeps, accountId: string, eventId: string): Promise<EventRecord | null> {
  const { fanout, tail, watermarks, pageCache } = deps.events;
  const partition = deps.events.producer.partitionOf(accountId);
  /** The event when the store holds it (`reached`: the watermark is at or above its offset); its offset when only its id is stored, above the watermark; null when neither. */
  const lookup = async (reached: (offset: bigint) => Promise<boolean>): Promise<EventRecord | number | null> => {
    const doc = await deps.mongo.collections.events.findOne({ _id: eventId, account_id: accountId });
    if (!doc) return null;
    if (isWholeEventDoc(doc)) return docToRecord(doc);
    if (!(await reached(BigInt(doc.offset)))) return doc.offset;
    const body = await readEventAt(deps.mongo.collections.eventPages, { accountId, partition: doc.partition, offset: doc.offset }, pageCache);
    return body && body._id === eventId ? docToRecord(body) : null;
  };
  // The watermark this process knows, else one read of it.
  const known = await lookup(async (offset) => watermarks.cached(partition) >= offset || (await watermarks.current(partition)) >= offset);
  if (known !== null && typeof known !== 'number') return known;
  const deadline = Date.now() + deps.config.events.handoffTimeoutMs;
  void fanout.awake().catch((err: unknown) => deps.log.warn({ err }, 'the fan-out could not wake'));
  let head = await headOf(deps, partition, deadline);
  for (;;) {
    // Shared with the process's other waiting reads (at most one store read per poll interval).
    const through = await watermarks.recent(partition, CATCH_UP_POLL_MS * 2, CATCH_UP_POLL_MS, Math.max(0, deadline - Date.now()));
    const stored = await lookup(async (offset) => through >= offset); // after W was read: holds every event through W
    if (stored !== null && typeof stored !== 'number') return stored;
    // Its id is stored above W: it is on the log, so the read waits until W or the window reaches it.
    if (typeof stored === 'number' && BigInt(stored) >= head) head = BigInt(stored) + 1n;
    if (through >= head - 1n) return null;
    if (windowAtHead(deps.events, partition, head) && tail.covers(partition, through)) {
      const recent = readTail(deps.events, { accountId, partition, after: through, before: null, types: null, limit: Number.MAX_SAFE_INTEGER });
      if (recent) return recent.find((e) => e.record.id === eventId)?.record ?? null;
    }
    const left = deadline - Date.now();
    if (left <= 0) throw unavailable('Event history', 2);
    await sleep(Math.min(CATCH_UP_POLL_MS, left));
  }
}

interface PageRead {
  accountId: string;
  partition: number;
  /** Exclusive lower bound: the cursor's offset, -1 without one. */
  after: bigint;
  types: EventType[] | null;
  limit: number;
}

/** The partition's end offset, from a Kafka request sent after this call; 503 when Kafka gives none by `deadline`. */
async function headOf(deps: EventReadDeps, partition: number, deadline: number): Promise<bigint> {
  for (;;) {
    try {
      const head = (await withTimeout(deps.events.head.latest(), deadline - Date.now(), () => new Error('deadline passed'))).get(partition);
      if (head !== undefined) return head;
    } catch (err) {
      if (Date.now() >= deadline) {
        deps.log.warn({ err, partition }, 'could not learn the end of the event log for a read; answering 503');
        throw unavailable('Event history', 2);
      }
    }
    if (Date.now() >= deadline) throw unavailable('Event history', 2);
    await sleep(Math.min(100, deadline - Date.now()));
  }
}

/**
 * The page when this process can answer it complete through `head - 1`
 * (or full before it), else null (the fan-out and the store are both behind).
 * At first (`again` false) a cursor the window covers waits for the fan-out,
 * usually a few milliseconds behind the acknowledgement, rather than read MongoDB.
 */
async function readThrough(deps: ApiDeps, q: PageRead, head: bigint, again: boolean): Promise<EventRecord[] | null> {
  const { events } = deps;
  const { partition } = q;
  const fromWindow = (after: bigint, limit: number): EventRecord[] | null => {
    if (!windowAtHead(events, partition, head)) return null;
    return readTail(events, { accountId: q.accountId, partition, after, before: null, types: q.types, limit })?.map((e) => e.record) ?? null;
  };
  // Near the head: the window alone (no MongoDB), when it covers the cursor and the fan-out reached H.
  if (events.tail.covers(partition, q.after) && events.fanout.tailUsable()) {
    const recent = fromWindow(q.after, q.limit);
    if (recent) return recent;
    if (!again) return null;
  } else if (!again && q.after >= 0n && events.tail.enabled) events.tail.misses += 1; // a cursor the window cannot answer
  const through = await events.watermarks.current(partition);
  const stored = through > q.after ? (await readAfter(deps.mongo.collections.eventPages, { accountId: q.accountId, partition, since: { partition, offset: q.after }, through, types: q.types, limit: q.limit }, events.pageCache)).map(docToRecord) : [];
  // Complete through the watermark: enough when it reached H (or the cursor is past it), or the page is full.
  if (stored.length >= q.limit || through >= head - 1n || q.after >= head - 1n) return stored;
  // The rest from the window, which must hold every event after the watermark (read in this same tick).
  const rest = events.tail.covers(partition, through) ? fromWindow(through, q.limit - stored.length) : null;
  return rest ? [...stored, ...rest] : null;
}

/**
 * Waits until a read of `q` could be answered complete through `head - 1`:
 * this process's fan-out has dispatched up to `head` and its window covers the
 * cursor or the watermark, or the materializer has stored up to `head - 1`
 * (`once`: only one poll interval). False at `deadline`.
 */
async function caughtUp(deps: ApiDeps, q: PageRead, head: bigint, deadline: number, once: boolean): Promise<boolean> {
  const { watermarks, tail } = deps.events;
  const { partition } = q;
  for (;;) {
    const left = deadline - Date.now();
    if (left <= 0) return false;
    await sleep(Math.min(CATCH_UP_POLL_MS, left));
    if (once) return true;
    // Re-read from MongoDB at most every CATCH_UP_POLL_MS, one read shared by every waiting read of the process.
    const watermark = await watermarks.recent(partition, CATCH_UP_POLL_MS * 2, CATCH_UP_POLL_MS, Math.max(0, deadline - Date.now()));
    if (watermark >= head - 1n) return true;
    if (windowAtHead(deps.events, partition, head) && (tail.covers(partition, q.after) || tail.covers(partition, watermark))) return true;
  }
}

/** This process's fan-out has dispatched the partition up to `head` and its window can be read. */
function windowAtHead(events: Pick<ApiDeps['events'], 'fanout'>, partition: number, head: bigint): boolean {
  return events.fanout.tailUsable() && events.fanout.position(partition) >= head;
}

/** How often a read waiting for the fan-out or the materializer looks again. */
const CATCH_UP_POLL_MS = 10;

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}
