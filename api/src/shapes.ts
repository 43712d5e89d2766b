/**
 * One definition per request and response shape (docs/decisions.md, "TypeBox").
 * A shape is a TypeBox schema: plain JSON Schema that our ajv compiles
 * (validation.ts), a static type (`Static<typeof X>`), a schema the OpenAPI
 * document is generated from (features/openapi/generate.ts) and, for the
 * tools, an MCP input or output schema (features/mcp/schemas.ts). Nothing
 * restates a shape by hand.
 *
 * A shape made with `component('Name', …)` appears once in the document under
 * components.schemas and is a `$ref` wherever another shape uses it.
 */
import { type TSchema, Type } from '@sinclair/typebox';
import { ERROR_STATUS } from '#shared/errors/index.js';
import { EVENT_TYPES } from '#shared/eventlog/types.js';

export { Type, type Static, type TSchema, type TObject } from '@sinclair/typebox';

const COMPONENT = Symbol('openapi component');

/** Names a shape: the OpenAPI document lists it under components.schemas and refers to it by `$ref`. */
export function component<T extends TSchema>(name: string, schema: T): T {
  return Object.assign(schema, { [COMPONENT]: name });
}

/** The component name a shape was given, if any (a copy made by spreading it keeps the name). */
export function componentName(schema: unknown): string | undefined {
  return (schema as { [COMPONENT]?: string } | null)?.[COMPONENT];
}

/** `T` or null: `anyOf [T, null]`. */
export const Nullable = <T extends TSchema>(schema: T, options: { description?: string } = {}) => Type.Union([schema, Type.Null()], options);

/** Any JSON object (no properties listed, so none are refused). */
export const AnyObject = (description?: string) => Type.Unsafe<Record<string, unknown>>({ type: 'object', ...(description ? { description } : {}) });

/** An RFC 3339 time as the API writes it. */
export const DateTime = (description?: string) => Type.String({ format: 'date-time', ...(description ? { description } : {}) });

/**
 * The schema as plain JSON (TypeBox's symbols dropped): for consumers that
 * are handed the schema as data, such as MCP clients reading tools/list.
 */
export function plainJson(schema: TSchema): Record<string, unknown> {
  return JSON.parse(JSON.stringify(schema)) as Record<string, unknown>;
}

/**
 * The schema with a description added to each named property; naming a property the schema
 * lacks is a bug caught at startup. Used where one shape is shown to a reader who needs
 * more words (an MCP tool's arguments, an OpenAPI query parameter).
 */
export function described<T extends TSchema>(schema: T, descriptions: Record<string, string>): T {
  const properties = { ...(schema as { properties?: Record<string, TSchema> }).properties };
  for (const [field, description] of Object.entries(descriptions)) {
    const property = properties[field];
    if (!property) throw new Error(`schema has no property "${field}" to describe`);
    properties[field] = { ...property, description };
  }
  return { ...schema, properties };
}

// Shapes every part of the API shares.

export const EventTypeSchema = component('EventType', Type.Unsafe<(typeof EVENT_TYPES)[number]>({ type: 'string', enum: [...EVENT_TYPES] }));

const ErrorDetailSchema = component(
  'ErrorDetail',
  Type.Object({
    path: Type.String({ description: 'The field, as a dotted path (`events[3].type`), or `body`/`query` for the whole input' }),
    message: Type.String(),
  }),
);

export const ErrorSchema = component(
  'Error',
  Type.Object(
    {
      error: Type.Object({
        code: Type.Unsafe<string>({ type: 'string', enum: Object.keys(ERROR_STATUS) }),
        message: Type.String({ description: 'For people; may change. Match on `code`.' }),
        request_id: Type.String({ description: 'Also in the X-Request-Id response header; quote it when reporting a problem' }),
        details: Type.Optional(Type.Array(ErrorDetailSchema, { description: 'One entry per bad field (validation), or per failed check (readyz)' })),
        oldest_cursor: Type.Optional(Type.String({ description: '`cursor_expired` (410) only: the oldest cursor still available; pass it as `since` to read from the oldest event kept' })),
      }),
    },
    { description: 'Every error of the service has this shape; the HTTP status follows from `code`.' },
  ),
);

export const EventRecordSchema = component(
  'EventRecord',
  Type.Object(
    {
      id: Type.String({ examples: ['evt_0a1b2c3d4e5f60718293a4b5'] }),
      type: EventTypeSchema,
      created_at: DateTime('When the API accepted the event'),
      occurred_at: Type.Optional(DateTime('When the producer says it happened (only when the producer sent it)')),
      data: AnyObject('The event payload, as the producer sent it (empty when `data_unavailable`)'),
      data_unavailable: Type.Optional(
        Type.Literal(true, {
          description: "Present only on an event the store refused to hold (written to the log without ingest's checks): its id, type and times are kept, its data is not served",
        }),
      ),
      cursor: Type.String({ description: 'Opaque position in the log; pass back as `since`', examples: ['c1_MS40Mg'] }),
    },
    { description: 'One event as every read path returns it (polling, long-poll, SSE `data:`, webhook body, MCP tools)' },
  ),
);

type ErrorStatus = 400 | 401 | 404 | 409 | 410 | 413 | 415 | 429 | 503;
const ERROR_RESPONSES: Record<ErrorStatus, string> = {
  400: 'BadRequest',
  401: 'Unauthorized',
  404: 'NotFound',
  409: 'Conflict',
  410: 'CursorExpired',
  413: 'PayloadTooLarge',
  415: 'UnsupportedMediaType',
  429: 'RateLimited',
  503: 'Unavailable',
};

/** A route's error responses by status (the shared ones of the document), and `default` for any other. */
export function errors(...statuses: ErrorStatus[]): Record<string, { $ref: string }> {
  const out: Record<string, { $ref: string }> = Object.fromEntries(statuses.map((s) => [String(s), { $ref: `#/components/responses/${ERROR_RESPONSES[s]}` }]));
  out.default = { $ref: '#/components/responses/Error' };
  return out;
}
