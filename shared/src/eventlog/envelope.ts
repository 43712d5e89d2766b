/**
 * The event envelope: how an event is built, checked, put on the topic and
 * turned into the record every read path returns.
 */
import { randomBytes } from 'node:crypto';
import { encodeCursor, type Position } from '../cursor.js';
import type { EventDoc } from '../mongo/documents.js';
import { isEventType, type EventEnvelope, type EventRecord, type EventType } from './types.js';

const DEFAULT_MAX_DATA_BYTES = 64 * 1024;
/** Deeper objects than this are refused: MongoDB stores at most 100 levels and nobody needs 32. */
const MAX_DATA_DEPTH = 32;

/**
 * Event ids take their 12 random bytes from a pool filled by the same CSPRNG
 * 512 ids at a time: one randomBytes call per id was ~3 µs, a tenth of the
 * per-event CPU of a batch ingest.
 */
const ID_BYTES = 12;
const POOL_IDS = 512;
let pool = Buffer.alloc(0);
let poolAt = 0;

export function newEventId(): string {
  if (poolAt + ID_BYTES > pool.length) {
    pool = randomBytes(ID_BYTES * POOL_IDS);
    poolAt = 0;
  }
  const id = pool.toString('hex', poolAt, poolAt + ID_BYTES);
  poolAt += ID_BYTES;
  return `evt_${id}`;
}

interface NewEvent {
  account_id: string;
  type: EventType;
  data: Record<string, unknown>;
  occurred_at?: string;
  target_subscription_id?: string;
}

/** Assigns the id and the API's time. `data` must already have passed `checkEventData`. */
export function buildEnvelope(input: NewEvent, now: Date): EventEnvelope {
  const envelope: EventEnvelope = {
    id: newEventId(),
    account_id: input.account_id,
    type: input.type,
    created_at: now.toISOString(),
    data: input.data,
  };
  if (input.occurred_at !== undefined) envelope.occurred_at = new Date(input.occurred_at).toISOString();
  if (input.target_subscription_id !== undefined) envelope.target_subscription_id = input.target_subscription_id;
  return envelope;
}

/**
 * Returns why `data` cannot be stored, or null when it can. Every event on the
 * topic must be writable to MongoDB: an unwritable one would stall its
 * partition's materializer (it is dead-lettered after a few tries), so the
 * rules of the strictest server we run on (no `$`-prefixed or dotted keys, no
 * NUL in keys, no array directly inside an array, bounded depth and size) are
 * enforced at the door.
 */
export function checkEventData(data: unknown, maxBytes = DEFAULT_MAX_DATA_BYTES): string | null {
  if (data === null || typeof data !== 'object' || Array.isArray(data)) return 'must be a JSON object';
  // Shape first: JSON.stringify recurses, and a body nested 10,000 deep (20 KB of
  // brackets) overflows the stack. After this walk the depth is at most MAX_DATA_DEPTH.
  const problem = checkShape(data);
  if (problem) return problem;
  const size = Buffer.byteLength(JSON.stringify(data), 'utf8');
  if (size > maxBytes) return `is ${size} bytes serialized; the limit is ${maxBytes}`;
  return null;
}

/** Depth and key rules, checked iteratively so no input depth can exhaust the stack. */
function checkShape(data: object): string | null {
  const stack: [unknown, number][] = [[data, 1]];
  while (stack.length > 0) {
    const [value, depth] = stack.pop()!;
    if (value === null || typeof value !== 'object') continue;
    if (depth > MAX_DATA_DEPTH) return `is nested deeper than ${MAX_DATA_DEPTH} levels`;
    if (Array.isArray(value)) {
      for (const item of value) {
        // Real MongoDB stores them; FerretDB, the server these machines run, refuses them.
        if (Array.isArray(item)) return 'has an array directly inside an array, which cannot be stored (wrap the inner array in an object)';
        stack.push([item, depth + 1]);
      }
      continue;
    }
    for (const [key, item] of Object.entries(value)) {
      if (key.startsWith('$') || key.includes('.') || key.includes('\0')) {
        return `has a key "${key.slice(0, 40)}" that cannot be stored (keys may not start with "$" or contain "." or NUL)`;
      }
      stack.push([item, depth + 1]);
    }
  }
  return null;
}

export function encodeEnvelope(envelope: EventEnvelope): Buffer {
  return Buffer.from(JSON.stringify(envelope), 'utf8');
}

/** Parses a message value; null when it is not an envelope this service wrote. */
export function decodeEnvelope(value: Buffer | null): EventEnvelope | null {
  return value ? decodeEnvelopeText(value.toString('utf8')) : null;
}

/** decodeEnvelope of the value's text. */
export function decodeEnvelopeText(text: string): EventEnvelope | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return null;
  }
  if (parsed === null || typeof parsed !== 'object') return null;
  const e = parsed as Partial<EventEnvelope>;
  const ok =
    typeof e.id === 'string' &&
    typeof e.account_id === 'string' &&
    isEventType(e.type) &&
    typeof e.created_at === 'string' &&
    e.data !== null &&
    typeof e.data === 'object' &&
    !Array.isArray(e.data) &&
    (e.occurred_at === undefined || typeof e.occurred_at === 'string');
  return ok ? (e as EventEnvelope) : null;
}

const ID_PREFIX = '{"id":"';

/**
 * The event id of an envelope's text, read without parsing it, when the text
 * starts the way encodeEnvelope writes every envelope (`{"id":"<id>",
 * "account_id":<accountId as JSON>,`: buildEnvelope's first two keys) and
 * names `accountId`; null otherwise (parse it whole to know what it is).
 * It says nothing about the rest: decodeEnvelopeText may still refuse the text.
 */
export function peekEnvelopeId(text: string, accountId: string): string | null {
  if (!text.startsWith(ID_PREFIX)) return null;
  const end = text.indexOf('"', ID_PREFIX.length);
  if (end <= ID_PREFIX.length) return null;
  const id = text.slice(ID_PREFIX.length, end);
  // An escape in the id (the quote found may be an escaped one): not worth reading here.
  if (id.includes('\\')) return null;
  return text.startsWith(`,"account_id":${JSON.stringify(accountId)},`, end + 1) ? id : null;
}

/** The record every read path returns; one key order everywhere. */
export function toRecord(envelope: EventEnvelope, position: Position): EventRecord {
  const record: EventRecord = { id: envelope.id, type: envelope.type, created_at: envelope.created_at, data: envelope.data, cursor: encodeCursor(position) };
  return envelope.occurred_at === undefined ? record : withOccurredAt(record, envelope.occurred_at);
}

function withOccurredAt(record: EventRecord, occurredAt: string): EventRecord {
  return { id: record.id, type: record.type, created_at: record.created_at, occurred_at: occurredAt, data: record.data, cursor: record.cursor };
}

/** The stored document of an event at `position`. */
export function toEventDoc(envelope: EventEnvelope, position: Position): EventDoc {
  const doc: EventDoc = {
    _id: envelope.id,
    account_id: envelope.account_id,
    type: envelope.type,
    data: envelope.data,
    created_at: new Date(envelope.created_at),
    partition: position.partition,
    offset: Number(position.offset),
    cursor: encodeCursor(position),
  };
  if (envelope.occurred_at !== undefined) doc.occurred_at = new Date(envelope.occurred_at);
  return doc;
}

export function docToRecord(doc: EventDoc): EventRecord {
  const record: EventRecord = { id: doc._id, type: doc.type, created_at: doc.created_at.toISOString(), data: doc.data, cursor: doc.cursor };
  const full = doc.occurred_at ? withOccurredAt(record, doc.occurred_at.toISOString()) : record;
  if (doc.data_unavailable) return { ...full, data: {}, data_unavailable: true, cursor: full.cursor };
  return full;
}

/** The stand-in stored at a dead-lettered event's position: its id, type, times and place, no data. */
export function unavailableEventDoc(doc: EventDoc): EventDoc {
  const standIn: EventDoc = {
    _id: doc._id,
    account_id: doc.account_id,
    type: doc.type,
    data: {},
    created_at: doc.created_at,
    partition: doc.partition,
    offset: doc.offset,
    cursor: doc.cursor,
    data_unavailable: true,
  };
  if (doc.occurred_at) standIn.occurred_at = doc.occurred_at;
  return standIn;
}
