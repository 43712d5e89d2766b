import type Router from '@koa/router';
import { unauthorized } from '#shared/errors/index.js';
import { metricsAuthorizer } from '#shared/metrics.js';
import type { ApiDeps } from '../../deps.js';
import { guard, newRouter, route } from '../../middleware/route.js';
import { errors, Type } from '../../shapes.js';

const METRICS_PATH = '/metrics';

/** GET /metrics: Prometheus text format; behind METRICS_TOKEN when one is configured. */
export function metricsRoutes(deps: ApiDeps): Router {
  const router = newRouter();
  const authorized = metricsAuthorizer(deps.config.metrics.token);
  const metricsToken = guard('metrics_token', (ctx) => {
    if (!authorized(ctx.get('Authorization'))) throw unauthorized('A valid metrics token is required');
  });
  const { registry } = deps.metrics;
  route(router, deps.config.http, {
    method: 'get',
    path: METRICS_PATH,
    guard: metricsToken,
    doc: {
      operationId: 'metrics',
      tags: ['operations'],
      summary: 'Prometheus metrics of this API process',
      description: 'Text exposition format 0.0.4. Open when METRICS_TOKEN is not set; otherwise `Authorization: Bearer <METRICS_TOKEN>`. Each process reports its own: scrape every pod.',
      security: deps.config.metrics.token === null ? [{}, { metricsToken: [] }] : [{ metricsToken: [] }],
      responses: { '200': { description: 'The metrics', type: 'text/plain; version=0.0.4', schema: Type.String() }, ...errors(401) },
    },
  }, async (ctx) => {
    ctx.type = registry.contentType;
    ctx.set('Cache-Control', 'no-store');
    ctx.body = await registry.metrics();
  });
  return router;
}
