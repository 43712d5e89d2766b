/**
 * Reusable parts of the OpenAPI document: response schemas, the one error
 * shape, error responses with their headers, and the security schemes.
 * Request schemas are not here: they come from each feature's schemas.ts.
 */
import { ERROR_STATUS } from '../../../../shared/src/errors/index.js';
import { EVENT_TYPES } from '../../../../shared/src/eventlog/types.js';
import type { SchemaObject } from './convert.js';

export const ref = (name: string): SchemaObject => ({ $ref: `#/components/schemas/${name}` });
const dateTime = (description: string): SchemaObject => ({ type: 'string', format: 'date-time', description });

export const schemas: Record<string, SchemaObject> = {
  ErrorDetail: {
    type: 'object',
    required: ['path', 'message'],
    properties: { path: { type: 'string', description: 'The field, as a dotted path (`events[3].type`), or `body`/`query` for the whole input' }, message: { type: 'string' } },
  },
  Error: {
    type: 'object',
    description: 'Every error of the service has this shape; the HTTP status follows from `code`.',
    required: ['error'],
    properties: {
      error: {
        type: 'object',
        required: ['code', 'message', 'request_id'],
        properties: {
          code: { type: 'string', enum: Object.keys(ERROR_STATUS) },
          message: { type: 'string', description: 'For people; may change. Match on `code`.' },
          request_id: { type: 'string', description: 'Also in the X-Request-Id response header; quote it when reporting a problem' },
          details: { type: 'array', items: ref('ErrorDetail'), description: 'One entry per bad field (validation), or per failed check (readyz)' },
        },
      },
    },
  },
  EventType: { type: 'string', enum: [...EVENT_TYPES] },
  EventRecord: {
    type: 'object',
    description: 'One event as every read path returns it (polling, long-poll, SSE `data:`, webhook body)',
    required: ['id', 'type', 'created_at', 'data', 'cursor'],
    properties: {
      id: { type: 'string', examples: ['evt_0a1b2c3d4e5f60718293a4b5'] },
      type: ref('EventType'),
      created_at: dateTime('When the API accepted the event'),
      occurred_at: dateTime('When the producer says it happened (only when the producer sent it)'),
      data: { type: 'object', description: 'The event payload, as the producer sent it (empty when `data_unavailable`)' },
      data_unavailable: {
        const: true,
        description: 'Present only on an event the store refused to hold (written to the log without ingest\'s checks): its id, type and times are kept, its data is not served',
      },
      cursor: { type: 'string', description: 'Opaque position in the log; pass back as `since`', examples: ['c1_MS40Mg'] },
    },
  },
  EventPage: {
    type: 'object',
    required: ['events', 'cursor'],
    properties: {
      events: { type: 'array', items: ref('EventRecord'), description: 'Oldest first' },
      cursor: { type: ['string', 'null'], description: 'Pass back as `since` to continue; null only when there was no `since` and no event yet' },
    },
  },
  WaitResult: {
    oneOf: [
      { type: 'object', required: ['event'], properties: { event: ref('EventRecord') } },
      {
        type: 'object',
        required: ['event', 'timed_out', 'cursor'],
        properties: {
          event: { type: 'null' },
          timed_out: { const: true },
          cursor: { type: ['string', 'null'], description: 'How far this wait checked: pass back as `since` to continue without a gap' },
        },
      },
    ],
  },
  StreamToken: {
    type: 'object',
    required: ['token', 'expires_at', 'stream_url'],
    properties: {
      token: { type: 'string', pattern: '^svcst_', description: 'Valid only as the `token` query parameter of the stream URL' },
      expires_at: dateTime('When the token stops opening streams (a stream already open runs on)'),
      stream_url: { type: 'string', description: 'The stream URL with this token, ready for EventSource: relative (`/api/v1/events/stream?token=…`) unless the server has PUBLIC_BASE_URL; never taken from the request\'s Host' },
    },
  },
  IngestResult: {
    type: 'object',
    required: ['events'],
    properties: {
      events: {
        type: 'array',
        description: 'In the order sent',
        items: { type: 'object', required: ['id', 'cursor'], properties: { id: { type: 'string' }, cursor: { type: 'string' } } },
      },
    },
  },
};

const header = (description: string, schema: SchemaObject = { type: 'string' }): SchemaObject => ({ description, schema });

export const headers: Record<string, SchemaObject> = {
  RequestId: header('The request id (a sane incoming X-Request-Id is echoed); also in error bodies'),
  RetryAfter: header('Seconds to wait before trying again', { type: 'integer', minimum: 0 }),
  RateLimitLimit: header('Requests allowed in the current window for this credential', { type: 'integer' }),
  RateLimitRemaining: header('Requests left in the current window', { type: 'integer' }),
  RateLimitReset: header('Seconds until the window resets', { type: 'integer' }),
  WwwAuthenticate: header('`Bearer`'),
};

const hdr = (name: string): SchemaObject => ({ $ref: `#/components/headers/${name}` });

function errorResponse(description: string, extraHeaders: Record<string, string> = {}): SchemaObject {
  return {
    description,
    headers: { 'X-Request-Id': hdr('RequestId'), ...Object.fromEntries(Object.entries(extraHeaders).map(([name, h]) => [name, hdr(h)])) },
    content: { 'application/json': { schema: ref('Error') } },
  };
}

export const responses: Record<string, SchemaObject> = {
  BadRequest: errorResponse('`validation_failed` (every bad field in `details`), `invalid_json` or `bad_request`'),
  Unauthorized: errorResponse('`unauthorized`: missing, malformed, expired or revoked credential', { 'WWW-Authenticate': 'WwwAuthenticate' }),
  NotFound: errorResponse('`not_found`'),
  Conflict: errorResponse('`conflict`'),
  PayloadTooLarge: errorResponse('`payload_too_large`: the body is over the limit'),
  UnsupportedMediaType: errorResponse('`unsupported_media_type`: bodies must be application/json'),
  RateLimited: errorResponse('`rate_limited` (or `too_many_streams` on the stream URL)', {
    'Retry-After': 'RetryAfter',
    'RateLimit-Limit': 'RateLimitLimit',
    'RateLimit-Remaining': 'RateLimitRemaining',
    'RateLimit-Reset': 'RateLimitReset',
  }),
  Unavailable: errorResponse('`unavailable`: Kafka or MongoDB cannot be reached right now; nothing was half-done', { 'Retry-After': 'RetryAfter' }),
  Error: errorResponse('Any other error, in the same shape (`internal` for a 500, which never exposes details)'),
};

export const securitySchemes: Record<string, SchemaObject> = {
  session: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'Session token from signup or login (`Authorization: Bearer <jwt>`), valid 30 days' },
  apiKey: { type: 'http', scheme: 'bearer', bearerFormat: 'svc_…', description: 'The account\'s platform API key (`Authorization: Bearer svc_…`); 100 requests per minute per key' },
  apiKeyHeader: { type: 'apiKey', in: 'header', name: 'X-API-Key', description: 'The platform API key in its own header' },
  streamToken: { type: 'apiKey', in: 'query', name: 'token', description: 'A `svcst_` stream token (about 120 s), only on the stream URL' },
  ingestToken: { type: 'http', scheme: 'bearer', description: 'The producers\' shared secret (INGEST_TOKEN); never a user credential' },
  metricsToken: { type: 'http', scheme: 'bearer', description: 'METRICS_TOKEN, when the deployment sets one' },
};

/** Session token, API key as bearer, or API key header: what `authenticate` accepts. */
export const USER_SECURITY = [{ session: [] }, { apiKey: [] }, { apiKeyHeader: [] }];
export const PUBLIC: never[] = [];

/** Standard error responses by status, for an operation's `responses`. */
export function errors(...statuses: (400 | 401 | 404 | 409 | 413 | 415 | 429 | 503)[]): Record<string, SchemaObject> {
  const names = { 400: 'BadRequest', 401: 'Unauthorized', 404: 'NotFound', 409: 'Conflict', 413: 'PayloadTooLarge', 415: 'UnsupportedMediaType', 429: 'RateLimited', 503: 'Unavailable' } as const;
  const out: Record<string, SchemaObject> = Object.fromEntries(statuses.map((s) => [String(s), { $ref: `#/components/responses/${names[s]}` }]));
  out.default = { $ref: '#/components/responses/Error' };
  return out;
}

/** A JSON response with a schema. */
export function json(description: string, schema: SchemaObject, extra: SchemaObject = {}): SchemaObject {
  return { description, headers: { 'X-Request-Id': hdr('RequestId') }, content: { 'application/json': { schema } }, ...extra };
}

/** The rate-limit headers every authenticated success carries. */
export const RATE_HEADERS = { 'RateLimit-Limit': hdr('RateLimitLimit'), 'RateLimit-Remaining': hdr('RateLimitRemaining'), 'RateLimit-Reset': hdr('RateLimitReset') };

/** A JSON response to an authenticated request (rate-limit headers included). */
export function authedJson(description: string, schema: SchemaObject): SchemaObject {
  return { description, headers: { 'X-Request-Id': hdr('RequestId'), ...RATE_HEADERS }, content: { 'application/json': { schema } } };
}
