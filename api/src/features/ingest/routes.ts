import type Router from '@koa/router';
import type { ApiDeps } from '../../deps.js';
import { newRouter, route, type RouteDoc } from '../../middleware/route.js';
import { LOG_SAMPLE } from '../../middleware/request-context.js';
import { ingestGuard } from './auth.js';
import { checkKey } from './idempotency.js';
import { errors, type Static } from '../../shapes.js';
import { ingestBodySchema, IngestResultSchema, parseIngestBody } from './schemas.js';
import { ingestEvents } from './service.js';

/** POST /internal/v1/events: how producers put events into the log (INGEST_TOKEN, the route's guard). */
export function ingestRoutes(deps: ApiDeps): Router {
  const router = newRouter('/internal/v1');
  const { ingestMaxBatch, ingestMaxDataBytes } = deps.config.events;
  const doc: RouteDoc = {
    operationId: 'ingestEvents',
    tags: ['ingest'],
    summary: 'Append events to the log (producers only)',
    description:
      `One event, or \`{"events": [...]}\` with up to ${ingestMaxBatch}. Every event is checked first: one bad event rejects the batch ` +
      '(including data the store cannot hold: keys starting with `$` or containing `.` or NUL, an array directly inside an array, too deep or too large). ' +
      'Answers once Kafka has acknowledged every event; from then on it is durable.\n\n' +
      'Retries: a 503 or a lost answer may leave some events of the request written. Send an `Idempotency-Key` header (or an `idempotency_key` per event) ' +
      'and retry with the same key and body: a finished request answers again with the first ids and cursors (`Idempotent-Replayed: true`) and writes nothing; ' +
      'a failed one is written again under the same ids, and an event written by both attempts is stored and served once. ' +
      'A request\'s key is scoped to the ingest token, an event\'s `idempotency_key` to the token and the event\'s `account_id` (two accounts may use one key); both are kept 24 hours. The same key with another body answers 409; a key whose first attempt is still running answers 409 with `Retry-After`.',
    headers: [
      {
        name: 'Idempotency-Key',
        in: 'header',
        required: false,
        description: 'Makes a retry of the whole request harmless for 24 h (1 to 255 visible ASCII characters, unique per request). Per-event `idempotency_key` fields are ignored when it is present.',
        schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x21-\\x7e]+$' },
      },
    ],
    body: ingestBodySchema(ingestMaxBatch, ingestMaxDataBytes),
    responses: {
      '202': {
        description: 'Accepted and durable (or, for a retried idempotency key, accepted earlier: the first answer again)',
        schema: IngestResultSchema,
        headers: { 'Idempotent-Replayed': { description: '`true` when every event was answered from an earlier request with the same idempotency key (nothing written)', schema: { const: 'true' } } },
      },
      ...errors(400, 401, 409, 413, 415, 503),
    },
  };
  route(router, deps.config.http, { method: 'post', path: '/events', guard: ingestGuard(deps.config.ingestToken), body: 'ingest', doc }, async (ctx) => {
    const events = parseIngestBody(ctx.request.body, { maxBatch: ingestMaxBatch, maxDataBytes: ingestMaxDataBytes });
    const header = ctx.get('Idempotency-Key');
    const requestKey = ctx.headers['idempotency-key'] === undefined ? undefined : checkKey(header, 'Idempotency-Key');
    const token = /^Bearer\s+(\S+)/i.exec(ctx.get('Authorization'))?.[1] ?? '';
    const { replayed, ...result } = await ingestEvents(deps, events, { token, requestKey });
    if (replayed) ctx.set('Idempotent-Replayed', 'true');
    ctx.body = result satisfies Static<typeof IngestResultSchema>;
    ctx.status = 202;
    ctx.state[LOG_SAMPLE] = deps.config.events.ingestLogEvery;
  });
  return router;
}
