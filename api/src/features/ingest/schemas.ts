import { AppError, validationFailed, type ErrorDetail } from '#shared/errors/index.js';
import { checkEventData } from '#shared/eventlog/envelope.js';
import { PRODUCER_EVENT_TYPES, type EventType } from '#shared/eventlog/types.js';
import { AnyObject, component, type Static, type TSchema, Type } from '../../shapes.js';
import { bodyValidator } from '../../validation.js';

/** One event of an ingest request. */
export const IngestEventSchema = Type.Object(
  {
    account_id: Type.String({ pattern: '^[A-Za-z0-9_-]{1,64}$' }),
    // The operational types (webhook.disabled, webhook.delivery_exhausted) are the service's own: refused here.
    type: Type.Unsafe<EventType>({ type: 'string', enum: [...PRODUCER_EVENT_TYPES] }),
    data: AnyObject(),
    occurred_at: Type.Optional(Type.String({ format: 'date-time' })),
    /** The producer's key for this event (see idempotency.ts); not part of the event. */
    idempotency_key: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 255,
        pattern: '^[\\x21-\\x7e]+$',
        description:
          'Makes a retry of this event harmless for 24 h: the same key (per ingest token) with the same event returns the first id and cursor and writes nothing. Ignored when the request has an Idempotency-Key header.',
      }),
    ),
  },
  { additionalProperties: false },
);
export type IngestEvent = Static<typeof IngestEventSchema>;
const eventValidator = bodyValidator<IngestEvent>(IngestEventSchema);

/** The whole body as documented: one event, or a batch (parseIngestBody checks it part by part, naming each bad event). */
export function ingestBodySchema(maxBatch: number, maxDataBytes: number): TSchema {
  const event = { ...IngestEventSchema, properties: { ...IngestEventSchema.properties, data: AnyObject(`The payload: at most ${maxDataBytes} bytes as JSON`) } };
  return Type.Union([event, Type.Object({ events: Type.Array(event, { minItems: 1, maxItems: maxBatch }) }, { additionalProperties: false })]);
}

export const IngestResultSchema = component(
  'IngestResult',
  Type.Object({
    events: Type.Array(Type.Object({ id: Type.String(), cursor: Type.String() }), { description: 'In the order sent' }),
  }),
);

const MAX_DETAILS = 50;

/**
 * One event, or `{events: [...]}`. Every event is checked before anything is
 * produced; any bad one rejects the whole batch, each problem named by its
 * path (`events[3].type`).
 */
export function parseIngestBody(body: unknown, limits: { maxBatch: number; maxDataBytes: number }): IngestEvent[] {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw validationFailed([{ path: 'body', message: 'must be an event object or {"events": [...]}' }]);
  }
  const isBatch = 'events' in body;
  if (isBatch && Object.keys(body).length !== 1) {
    throw validationFailed([{ path: 'body', message: 'a batch has only the "events" field' }]);
  }
  const items: unknown[] = isBatch ? asBatch((body as { events: unknown }).events, limits.maxBatch) : [body];
  const details: ErrorDetail[] = [];
  const events = items.map((item, i) => {
    const prefix = isBatch ? `events[${i}]` : '';
    try {
      const event = eventValidator(item);
      const problem = checkEventData(event.data, limits.maxDataBytes);
      if (problem) details.push({ path: join(prefix, 'data'), message: problem });
      // RFC 3339 allows a leap second (23:59:60), which JavaScript dates cannot hold.
      if (event.occurred_at !== undefined && Number.isNaN(Date.parse(event.occurred_at))) {
        details.push({ path: join(prefix, 'occurred_at'), message: 'must be a time that can be represented (leap seconds are not accepted)' });
      }
      return event;
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      for (const d of err.details ?? []) details.push({ path: d.path === 'body' ? prefix || 'body' : join(prefix, d.path), message: d.message });
      return null;
    }
  });
  if (details.length > 0) {
    const shown = details.slice(0, MAX_DETAILS);
    throw validationFailed(shown, details.length > shown.length ? `Request validation failed (${details.length} problems, first ${MAX_DETAILS} shown)` : undefined);
  }
  return events as IngestEvent[];
}

function asBatch(events: unknown, maxBatch: number): unknown[] {
  if (!Array.isArray(events)) throw validationFailed([{ path: 'events', message: 'must be an array' }]);
  if (events.length === 0) throw validationFailed([{ path: 'events', message: 'must have at least 1 event' }]);
  if (events.length > maxBatch) throw validationFailed([{ path: 'events', message: `must have at most ${maxBatch} events, got ${events.length}` }]);
  return events;
}

function join(prefix: string, path: string): string {
  return prefix ? `${prefix}.${path}` : path;
}
