import type Router from '@koa/router';
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
  const pairs = new RouterPairs();
  // With TRUST_PROXY, ctx.request.ip is the rightmost-but-(hops-1) X-Forwarded-For entry:
  // the one our own proxy wrote. Entries further left come from the client and are ignored.
  const app = new Koa({ proxy: deps.config.http.trustProxy, maxIpsCount: deps.config.http.proxyHops });
  // Koa composes `app.middleware` with this when the server starts (Koa 3's `compose` option, absent from its types).
  const holder = app as unknown as { compose: Compose };
  const koaCompose = holder.compose; // Koa's own (koa-compose): no async frame per step
  holder.compose = (stack) => pairs.compose(stack, koaCompose);
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
    pairs.add(router, routes, allowed);
    app.use(routes);
    app.use(allowed);
  }
  return app;
}

type Composed = (ctx: Koa.ParameterizedContext, next?: Koa.Next) => Promise<void>;
type Compose = (stack: Koa.Middleware[]) => Composed;

/**
 * The app's middleware list stays one `routes()` + `allowedMethods()` pair per
 * router (what tests and tools read from `app.middleware`), but runs the pairs
 * as one step: a request that a router's route takes (path and method) goes
 * straight to that router's pair, the first such, as the chain would; any
 * other (404, 405, OPTIONS, 501) runs the whole chain of pairs, so those
 * answers are the chain's own. Why: in the chain, a request answered by the
 * eighth router waits inside every earlier router's pending promises and
 * bound `next` functions, and a long-poll or stream holds them for its whole
 * life (`npm run bench -- --only waiter-bytes` measures the heap per held
 * long-poll; docs/performance.md, "A held reader in bytes").
 */
class RouterPairs {
  private readonly pairs = new Map<Koa.Middleware, { router: Router; allowed: Koa.Middleware }>();

  add(router: Router, routes: Koa.Middleware, allowed: Koa.Middleware): void {
    this.pairs.set(routes, { router, allowed });
  }

  compose(stack: Koa.Middleware[], compose: Compose): Composed {
    const out: Koa.Middleware[] = [];
    for (let i = 0; i < stack.length; ) {
      const group: RouterStep[] = [];
      for (let pair = this.pairs.get(stack[i]!); pair && stack[i + 1] === pair.allowed; pair = this.pairs.get(stack[i]!)) {
        group.push({ router: pair.router, routes: stack[i]!, chain: compose([stack[i]!, pair.allowed]) });
        i += 2;
      }
      if (group.length > 0) out.push(routeFirstMatch(group, compose));
      else out.push(stack[i++]!);
    }
    return compose(out);
  }
}

interface RouterStep {
  router: Router;
  routes: Koa.Middleware;
  /** routes() then allowedMethods(). */
  chain: Composed;
}

/**
 * A route matched by path and method: that router's routes() alone (its
 * allowedMethods() does nothing for a matched method: it only answers when
 * no route of the method matched). Else the whole chain.
 */
function routeFirstMatch(group: RouterStep[], compose: Compose): Koa.Middleware {
  const all = compose(group.map((g) => g.chain));
  return function routeRequest(ctx, next) {
    for (const g of group) if (g.router.match(ctx.path, ctx.method).route) return g.routes(ctx, next);
    return all(ctx, next);
  };
}
