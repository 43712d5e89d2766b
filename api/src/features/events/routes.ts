import type Router from '@koa/router';
import type { ApiDeps } from '../../deps.js';
import { authenticate, authOf } from '../../middleware/auth.js';
import type { WaitInput } from './schemas.js';
import { listEvents, waitForEvent } from './service.js';
import { newRouter, route } from '../../middleware/route.js';

/** Cursor polling and long-poll over the caller's account's events. */
export function eventRoutes(deps: ApiDeps): Router {
  const router = newRouter('/api/v1/events');

  route(router, deps.config.http, { method: 'get', path: '/', guard: authenticate(deps) }, async (ctx) => {
    ctx.body = await listEvents(deps, authOf(ctx).accountId, ctx.query);
  });

  route(router, deps.config.http, { method: 'post', path: '/wait', guard: authenticate(deps) }, async (ctx) => {
    // A client that goes away frees its waiter at once. (The request's own 'close'
    // fires as soon as its body has been read; the response's fires on disconnect.)
    const abort = new AbortController();
    const onClose = (): void => abort.abort();
    ctx.res.once('close', onClose);
    // A client that left while it was being authenticated has already closed: its
    // 'close' event is gone, and without this its waiter would live for timeout_ms.
    if (ctx.res.destroyed) abort.abort();
    try {
      ctx.body = await waitForEvent(deps, authOf(ctx).accountId, (ctx.request.body ?? {}) as WaitInput, abort.signal);
    } finally {
      ctx.res.off('close', onClose);
    }
  });

  return router;
}
