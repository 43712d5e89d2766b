import type Router from '@koa/router';
import { unauthorized } from '../../../../shared/src/errors/index.js';
import { metricsAuthorizer } from '../../../../shared/src/metrics.js';
import type { ApiDeps } from '../../deps.js';
import { guard, newRouter, route } from '../../middleware/route.js';

export const METRICS_PATH = '/metrics';

/** GET /metrics: Prometheus text format; behind METRICS_TOKEN when one is configured. */
export function metricsRoutes(deps: ApiDeps): Router {
  const router = newRouter();
  const authorized = metricsAuthorizer(deps.config.metrics.token);
  const metricsToken = guard('metrics_token', (ctx) => {
    if (!authorized(ctx.get('Authorization'))) throw unauthorized('A valid metrics token is required');
  });
  const { registry } = deps.metrics;
  route(router, deps.config.http, { method: 'get', path: METRICS_PATH, guard: metricsToken }, async (ctx) => {
    ctx.type = registry.contentType;
    ctx.set('Cache-Control', 'no-store');
    ctx.body = await registry.metrics();
  });
  return router;
}
