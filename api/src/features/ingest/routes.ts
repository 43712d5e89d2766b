import type Router from '@koa/router';
import type { ApiDeps } from '../../deps.js';
import { newRouter, route } from '../../middleware/route.js';
import { LOG_SAMPLE } from '../../middleware/request-context.js';
import { ingestGuard } from './auth.js';
import { checkKey } from './idempotency.js';
import { parseIngestBody } from './schemas.js';
import { ingestEvents } from './service.js';

/** POST /internal/v1/events: how producers put events into the log (INGEST_TOKEN, the route's guard). */
export function ingestRoutes(deps: ApiDeps): Router {
  const router = newRouter('/internal/v1');
  route(router, deps.config.http, { method: 'post', path: '/events', guard: ingestGuard(deps.config.ingestToken), body: 'ingest' }, async (ctx) => {
    const events = parseIngestBody(ctx.request.body, { maxBatch: deps.config.events.ingestMaxBatch, maxDataBytes: deps.config.events.ingestMaxDataBytes });
    const header = ctx.get('Idempotency-Key');
    const requestKey = ctx.headers['idempotency-key'] === undefined ? undefined : checkKey(header, 'Idempotency-Key');
    const token = /^Bearer\s+(\S+)/i.exec(ctx.get('Authorization'))?.[1] ?? '';
    const { replayed, ...result } = await ingestEvents(deps, events, { token, requestKey });
    if (replayed) ctx.set('Idempotent-Replayed', 'true');
    ctx.body = result;
    ctx.status = 202;
    ctx.state[LOG_SAMPLE] = deps.config.events.ingestLogEvery;
  });
  return router;
}
