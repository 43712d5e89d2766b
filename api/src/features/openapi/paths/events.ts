import type { ApiConfig } from '../../../config.js';
import { listEventsQuery, waitBody } from '../../events/schemas.js';
import { eventValidator } from '../../ingest/schemas.js';
import { streamQuery } from '../../streams/schemas.js';
import { authedJson, errors, json, ref, USER_SECURITY } from '../components.js';
import { bodySchema, queryParameters, type SchemaObject } from '../convert.js';

const SSE_EXAMPLE = 'retry: 3000\n\nid: c1_MS40Mg\nevent: call.started\ndata: {"id":"evt_0a1b2c3d4e5f60718293a4b5","type":"call.started","created_at":"2025-01-01T12:00:00.000Z","data":{"call_id":"c_1"},"cursor":"c1_MS40Mg"}\n\n: heartbeat\n\n';

/** Polling, long-poll, stream tokens, the SSE stream and the producer ingest endpoint. */
export function eventPaths(config: ApiConfig): Record<string, SchemaObject> {
  const event = bodySchema(eventValidator);
  const eventFields = event.properties as Record<string, SchemaObject>;
  eventFields.data = { ...eventFields.data, description: `The payload: at most ${config.events.ingestMaxDataBytes} bytes as JSON` };
  return {
    '/api/v1/events': {
      get: {
        operationId: 'listEvents',
        tags: ['events'],
        summary: 'Poll the account\'s events after a cursor',
        description: 'Oldest first. Pass the returned `cursor` back as `since` to continue after the last event returned. Only events already stored are returned, in log order, so a cursor never skips an event that lands later.',
        security: USER_SECURITY,
        parameters: queryParameters(listEventsQuery, { type: 'Only events of this type', since: 'A cursor from an earlier response: events strictly after it', limit: 'Most events to return (default 100)' }),
        responses: { '200': authedJson('A page of events', ref('EventPage')), ...errors(400, 401, 429, 503) },
      },
    },
    '/api/v1/events/wait': {
      post: {
        operationId: 'waitForEvent',
        tags: ['events'],
        summary: 'Long-poll for the next matching event',
        description: `Answers as soon as a matching event arrives, or with \`{"event": null, "timed_out": true}\` after \`timeout_ms\` (default ${config.events.longPollDefaultMs}, at most ${config.events.longPollMaxMs}). With \`since\`, an event already after that cursor answers at once. Loop it: the wait is capped at 55 s. At most ${config.events.maxLongPollsPerAccount} long-polls per account at once in one API process (429 beyond).`,
        security: USER_SECURITY,
        requestBody: { required: false, content: { 'application/json': { schema: bodySchema(waitBody) } } },
        responses: { '200': authedJson('The event, or a timeout', ref('WaitResult')), ...errors(400, 401, 413, 415, 429, 503) },
      },
    },
    '/api/v1/events/stream-token': {
      post: {
        operationId: 'createStreamToken',
        tags: ['events'],
        summary: 'Mint a short-lived token for the stream URL',
        description: `A \`svcst_\` token bound to the account, valid ${config.streams.tokenTtlSeconds} s, usable only as the \`token\` query parameter of the stream URL.`,
        security: USER_SECURITY,
        responses: { '201': authedJson('The token and a ready stream URL', ref('StreamToken')), ...errors(401, 429, 503) },
      },
    },
    '/api/v1/events/stream': {
      get: {
        operationId: 'streamEvents',
        tags: ['events'],
        summary: 'Server-sent event stream of the account\'s events',
        description: `Runs about ${Math.round(config.streams.durationMs / 1000)} s, then closes; reconnect with a fresh token (EventSource resumes by Last-Event-ID). At most ${config.streams.maxPerAccount} concurrent streams per account; each open counts as one request against the account's API rate limit. Each event is framed as \`id: <cursor>\`, \`event: <type>\`, \`data: <EventRecord JSON>\`; \`: heartbeat\` comments every ${Math.round(config.streams.heartbeatMs / 1000)} s.`,
        security: [{ streamToken: [] }],
        parameters: [
          ...queryParameters(streamQuery, { token: 'A `svcst_` stream token (API keys are refused here)', types: 'Comma-separated event types to receive (default: all)', since: 'Start after this cursor' }),
          { name: 'Last-Event-ID', in: 'header', required: false, description: 'Sent by EventSource on reconnect: resume after this cursor (wins over `since`)', schema: { type: 'string' } },
        ],
        responses: {
          '200': {
            description: 'The event stream',
            content: { 'text/event-stream': { schema: { type: 'string', description: 'Server-sent events; each `data:` line is one EventRecord as JSON' }, example: SSE_EXAMPLE, 'x-event-schema': ref('EventRecord') } },
          },
          ...errors(400, 401, 429, 503),
        },
      },
    },
    '/internal/v1/events': {
      post: {
        operationId: 'ingestEvents',
        tags: ['ingest'],
        summary: 'Append events to the log (producers only)',
        description:
          `One event, or \`{"events": [...]}\` with up to ${config.events.ingestMaxBatch}. Every event is checked first: one bad event rejects the batch ` +
          '(including data the store cannot hold: keys starting with `$` or containing `.` or NUL, an array directly inside an array, too deep or too large). ' +
          'Answers once Kafka has acknowledged every event; from then on it is durable.\n\n' +
          'Retries: a 503 or a lost answer may leave some events of the request written. Send an `Idempotency-Key` header (or an `idempotency_key` per event) ' +
          'and retry with the same key and body: a finished request answers again with the first ids and cursors (`Idempotent-Replayed: true`) and writes nothing; ' +
          'a failed one is written again under the same ids, and an event written by both attempts is stored and served once. ' +
          'Keys are scoped to the ingest token and kept 24 hours. The same key with another body answers 409; a key whose first attempt is still running answers 409 with `Retry-After`.',
        security: [{ ingestToken: [] }],
        parameters: [
          {
            name: 'Idempotency-Key',
            in: 'header',
            required: false,
            description: 'Makes a retry of the whole request harmless for 24 h (1 to 255 visible ASCII characters, unique per request). Per-event `idempotency_key` fields are ignored when it is present.',
            schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x21-\\x7e]+$' },
          },
        ],
        requestBody: {
          required: true,
          content: {
            'application/json': {
              schema: {
                oneOf: [event, { type: 'object', additionalProperties: false, required: ['events'], properties: { events: { type: 'array', minItems: 1, maxItems: config.events.ingestMaxBatch, items: event } } }],
              },
            },
          },
        },
        responses: {
          '202': json('Accepted and durable (or, for a retried idempotency key, accepted earlier: the first answer again)', ref('IngestResult'), {
            headers: {
              'X-Request-Id': { $ref: '#/components/headers/RequestId' },
              'Idempotent-Replayed': { description: '`true` when every event was answered from an earlier request with the same idempotency key (nothing written)', schema: { const: 'true' } },
            },
          }),
          ...errors(400, 401, 409, 413, 415, 503),
        },
      },
    },
  };
}
