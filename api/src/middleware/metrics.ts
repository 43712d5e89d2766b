import type { Context, Next } from 'koa';
import { statusClass } from '#shared/metrics.js';
import type { ApiMetrics } from '../metrics.js';
import { parkedOf } from '../live/held.js';

/**
 * First in the chain: counts and times every request once its response is
 * done (errors already rendered), labelled by the route template @koa/router
 * matched (`/api/v1/webhooks/:id`), never the raw path, so labels stay few.
 * A parked request (live/held.ts) is recorded when its handler has
 * written it, with that status and its whole duration.
 */
export function httpMetrics(metrics: ApiMetrics) {
  const record = (method: string, route: string, status: number, started: number): void => {
    metrics.httpRequests.inc({ method, route, status_code: String(status) });
    metrics.httpDuration.observe({ method, route, status_class: statusClass(status) }, (performance.now() - started) / 1000);
  };
  return async function recordRequest(ctx: Context, next: Next): Promise<void> {
    const started = performance.now();
    let failed = false;
    try {
      await next();
    } catch (err) {
      failed = true;
      throw err;
    } finally {
      const matched = (ctx as { _matchedRoute?: unknown })._matchedRoute;
      const route = typeof matched === 'string' ? matched : 'unmatched';
      const method = ctx.method;
      const parked = failed ? undefined : parkedOf(ctx);
      if (parked) parked.whenDone((status) => record(method, route, status, started));
      else record(method, route, failed ? 500 : ctx.status, started);
    }
  };
}
