import { EVENT_TYPES } from '#shared/eventlog/types.js';
import { component, EventRecordSchema, Nullable, type Static, Type } from '../../shapes.js';
import { bodyValidator, queryValidator } from '../../validation.js';

export const LIST_MAX_LIMIT = 500;
export const LIST_DEFAULT_LIMIT = 100;
/** docs/spec.md section 8; LONG_POLL_MAX_MS may lower it, never raise it. */
const LONG_POLL_CEILING_MS = 55_000;

/** An event type in a request: inline (not a $ref) so request schemas stay self-contained for MCP clients. */
const eventType = Type.Unsafe<(typeof EVENT_TYPES)[number]>({ type: 'string', enum: [...EVENT_TYPES] });

export const ListEventsQuery = Type.Object(
  {
    type: Type.Optional({ ...eventType, description: 'Only events of this type' }),
    since: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'A cursor from an earlier response: events strictly after it' })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: LIST_MAX_LIMIT, description: `Most events to return (default ${LIST_DEFAULT_LIMIT})` })),
  },
  { additionalProperties: false },
);
export type ListEventsInput = Static<typeof ListEventsQuery>;
export const listEventsQuery = queryValidator<ListEventsInput>(ListEventsQuery);

export const WaitBody = Type.Object(
  {
    types: Type.Optional(Type.Array(eventType, { maxItems: EVENT_TYPES.length, uniqueItems: true })),
    timeout_ms: Type.Optional(Type.Integer({ minimum: 0, maximum: LONG_POLL_CEILING_MS })),
    since: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
  },
  { additionalProperties: false },
);
export type WaitInput = Static<typeof WaitBody>;
export const waitBody = bodyValidator<WaitInput>(WaitBody);

export const EventPageSchema = component(
  'EventPage',
  Type.Object({
    events: Type.Array(EventRecordSchema, { description: 'Oldest first' }),
    cursor: Nullable(Type.String(), { description: 'Pass back as `since` to continue; null only when there was no `since` and no event yet' }),
  }),
);

const timedOut = Type.Object({
  event: Type.Null(),
  timed_out: Type.Literal(true),
  cursor: Nullable(Type.String(), { description: 'How far this wait checked: pass back as `since` to continue without a gap' }),
});

export const WaitResultSchema = component('WaitResult', Type.Union([Type.Object({ event: EventRecordSchema }), timedOut]));
