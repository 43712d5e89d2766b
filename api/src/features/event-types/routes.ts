import type Router from '@koa/router';
import type { ApiDeps } from '../../deps.js';
import { authenticate } from '../../middleware/auth.js';
import { newRouter, route } from '../../middleware/route.js';
import { errors } from '../../shapes.js';
import { EVENT_DATA_SCHEMAS, EVENT_TYPE_LIST_ETAG, EVENT_TYPE_LIST_JSON, EventTypeListSchema } from './schemas.js';

/**
 * GET /api/v1/event-types: the catalog of event types with the JSON Schema of
 * each type's data. Any account credential, like every /api/v1 read (it holds
 * nothing of the account, but is rate-limited per credential like the rest).
 * `Cache-Control: no-store` as every answer behind a credential (the guard's);
 * an ETag lets a client that keeps the catalog itself ask whether it changed
 * (304). The cacheable, credential-free copy of the same shapes is the
 * OpenAPI document.
 */
export function eventTypeRoutes(deps: ApiDeps): Router {
  const router = newRouter('/api/v1');

  route(router, deps.config.http, { method: 'get', path: '/event-types', guard: authenticate(deps),
    doc: {
      operationId: 'listEventTypes',
      tags: ['events'],
      summary: 'The event types, each with a description and the JSON Schema of its data',
      description:
        'The catalog of every type an event can have, for generating types and for choosing what to subscribe to. Each `data_schema` lists the fields producers send (also under components.schemas as `<Type>Data`); none is required and others may appear, since ingest stores `data` as sent. ' +
        'The answer carries an ETag: send it back as If-None-Match to learn whether the catalog changed (304 when it did not).',
      headers: [{ name: 'If-None-Match', in: 'header', required: false, description: 'The ETag of a catalog already held: 304 when it is still current', schema: { type: 'string' } }],
      responses: {
        '200': { description: 'The catalog', schema: EventTypeListSchema, headers: { ETag: { description: 'Changes when the catalog does', schema: { type: 'string' } } } },
        '304': { description: 'The catalog named by If-None-Match is current' },
        ...errors(401, 429, 503),
      },
      components: EVENT_DATA_SCHEMAS,
    },
  }, (ctx) => {
    ctx.set('ETag', EVENT_TYPE_LIST_ETAG);
    if (matchesCurrent(ctx.get('If-None-Match'))) {
      ctx.status = 304;
      return;
    }
    ctx.type = 'application/json';
    ctx.body = EVENT_TYPE_LIST_JSON;
  });

  return router;
}

/**
 * Whether If-None-Match names the current catalog (weak comparison, RFC 9110 13.1.2). Not Koa's
 * `ctx.fresh`: it answers "stale" whenever the request says `Cache-Control: no-cache`, which
 * fetch() adds to every request carrying If-None-Match, so a fetch-based client would never get its 304.
 */
function matchesCurrent(header: string): boolean {
  return header.split(',').some((tag) => {
    const t = tag.trim();
    return t === '*' || t.replace(/^W\//, '') === EVENT_TYPE_LIST_ETAG;
  });
}
