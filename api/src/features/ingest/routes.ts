import Router from '@koa/router';
import type { ApiDeps } from '../../deps.js';
import { parseIngestBody } from './schemas.js';
import { ingestEvents } from './service.js';

/** POST /internal/v1/events: how producers put events into the log (INGEST_TOKEN, checked in app.ts). */
export function ingestRoutes(deps: ApiDeps): Router {
  const router = new Router({ prefix: '/internal/v1' });
  router.post('/events', async (ctx) => {
    const events = parseIngestBody(ctx.request.body, { maxBatch: deps.config.events.ingestMaxBatch, maxDataBytes: deps.config.events.ingestMaxDataBytes });
    ctx.body = await ingestEvents(deps, events);
    ctx.status = 202;
  });
  return router;
}
