/**
 * Reusable parts of the OpenAPI document that are not shapes: the error
 * responses with their headers, and the security schemes. Shapes (request and
 * response bodies) are TypeBox schemas in api/src/shapes.ts and each feature's
 * schemas.ts; the document is generated from them (generate.ts).
 */
/** An OpenAPI object (schema, response, header…) as plain data. */
export type SchemaObject = Record<string, unknown>;

export const ref = (name: string): SchemaObject => ({ $ref: `#/components/schemas/${name}` });

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
  CursorExpired: errorResponse('`cursor_expired`: `since` is older than the retention (EVENT_RETENTION_DAYS); `oldest_cursor` says where history now starts'),
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

/** The rate-limit headers every authenticated success carries. */
export const RATE_HEADERS = { 'RateLimit-Limit': hdr('RateLimitLimit'), 'RateLimit-Remaining': hdr('RateLimitRemaining'), 'RateLimit-Reset': hdr('RateLimitReset') };
