import type Router from '@koa/router';
import type { ApiDeps } from '../../deps.js';
import { authenticate, authOf } from '../../middleware/auth.js';
import { newRouter, route } from '../../middleware/route.js';
import { statsQuery } from './schemas.js';
import { eventDeliveries, webhookStats } from './service.js';

/**
 * Read-only views of delivery activity, for the dashboard (and any client):
 * a subscription's delivery stats, and one event's deliveries with their
 * attempts. Same credentials as the routes they sit beside.
 */
export function activityRoutes(deps: ApiDeps): Router {
  const router = newRouter('/api/v1');
  const auth = authenticate(deps);

  route(router, deps.config.http, { method: 'get', path: '/webhooks/:id/stats', guard: auth }, async (ctx) => {
    const query = statsQuery({ ...ctx.query });
    ctx.body = await webhookStats(deps, authOf(ctx).accountId, ctx.params.id as string, query.window);
  });

  route(router, deps.config.http, { method: 'get', path: '/events/:id/deliveries', guard: auth }, async (ctx) => {
    ctx.body = await eventDeliveries(deps, authOf(ctx).accountId, ctx.params.id as string);
  });

  return router;
}
