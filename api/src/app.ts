import Koa from 'koa';
import type { ApiDeps } from './deps.js';
import { activityRoutes } from './features/activity/routes.js';
import { authRoutes } from './features/auth/routes.js';
import { dashboardRoutes } from './features/dashboard/routes.js';
import { eventRoutes } from './features/events/routes.js';
import { eventTypeRoutes } from './features/event-types/routes.js';
import { healthRoutes } from './features/health/routes.js';
import { ingestRoutes } from './features/ingest/routes.js';
import { keyRoutes } from './features/keys/routes.js';
import { metricsRoutes } from './features/metrics/routes.js';
import { openApiRoutes } from './features/openapi/routes.js';
import { mcpRoutes } from './features/mcp/routes.js';
import { streamRoutes } from './features/streams/routes.js';
import { webhookRoutes } from './features/webhooks/routes.js';
import { errorMiddleware } from './middleware/errors.js';
import { httpMetrics } from './middleware/metrics.js';
import { requestContext } from './middleware/request-context.js';
import { tracing } from './middleware/tracing.js';

/**
 * First of all: every response (errors, 404s, streams) tells browsers not to
 * guess a content type. Set before anything runs, so nothing can skip it; the
 * error middleware keeps headers already set.
 */
function securityHeaders(ctx: Koa.Context, next: Koa.Next): Promise<void> {
  ctx.set('X-Content-Type-Options', 'nosniff');
  return next();
}

/** Builds the Koa app from its dependencies; no I/O happens here. */
export function createApp(deps: ApiDeps): Koa {
  // With TRUST_PROXY, ctx.request.ip is the rightmost-but-(hops-1) X-Forwarded-For entry:
  // the one our own proxy wrote. Entries further left come from the client and are ignored.
  const app = new Koa({ proxy: deps.config.http.trustProxy, maxIpsCount: deps.config.http.proxyHops });
  app.silent = true; // errors are logged by the error middleware, once
  app.use(securityHeaders);
  app.use(httpMetrics(deps.metrics));
  app.use(tracing());
  app.use(requestContext(deps.log));
  app.use(errorMiddleware(deps.log));
  // No guard or body parser here: each route carries its own (middleware/route.ts), so what a
  // path may do never depends on how it is spelled.

  const routers = [healthRoutes(deps), metricsRoutes(deps), dashboardRoutes(deps), authRoutes(deps), keyRoutes(deps), ingestRoutes(deps), eventRoutes(deps), eventTypeRoutes(deps), streamRoutes(deps), webhookRoutes(deps), activityRoutes(deps), mcpRoutes(deps)];
  // The OpenAPI document is generated from the routes the other routers registered.
  routers.push(openApiRoutes(deps, routers));
  for (const router of routers) {
    const routes = router.routes() as unknown as Koa.Middleware;
    // Not thrown: the router sets the status (405, or 501 for a method it does not know at all)
    // and Allow, and the error middleware renders the JSON error around them.
    const allowed = router.allowedMethods() as unknown as Koa.Middleware;
    app.use(routes);
    app.use(allowed);
  }
  return app;
}
