import Router from '@koa/router';
import { unauthorized } from '../../../../shared/src/errors/index.js';
import { metricsAuthorizer } from '../../../../shared/src/metrics.js';
import type { ApiDeps } from '../../deps.js';

export const METRICS_PATH = '/metrics';

/** GET /metrics: Prometheus text format; behind METRICS_TOKEN when one is configured. */
export function metricsRoutes(deps: ApiDeps): Router {
  const router = new Router();
  const authorized = metricsAuthorizer(deps.config.metrics.token);
  const { registry } = deps.metrics;
  router.get(METRICS_PATH, async (ctx) => {
    if (!authorized(ctx.get('Authorization'))) throw unauthorized('A valid metrics token is required');
    ctx.type = registry.contentType;
    ctx.set('Cache-Control', 'no-store');
    ctx.body = await registry.metrics();
  });
  return router;
}
