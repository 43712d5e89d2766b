import type { Context, Next } from 'koa';
import { statusClass } from '../../../shared/src/metrics.js';
import type { ApiMetrics } from '../metrics.js';

/**
 * First in the chain: counts and times every request once its response is
 * done (errors already rendered), labelled by the route template @koa/router
 * matched (`/api/v1/webhooks/:id`), never the raw path, so labels stay few.
 */
export function httpMetrics(metrics: ApiMetrics) {
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
      const status = failed ? 500 : ctx.status;
      metrics.httpRequests.inc({ method: ctx.method, route, status_code: String(status) });
      metrics.httpDuration.observe({ method: ctx.method, route, status_class: statusClass(status) }, (performance.now() - started) / 1000);
    }
  };
}
