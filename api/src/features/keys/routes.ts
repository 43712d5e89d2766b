import type Router from '@koa/router';
import type { ApiDeps } from '../../deps.js';
import { authenticate, authOf } from '../../middleware/auth.js';
import { createOrRotateKey, revokeKey } from './service.js';
import { newRouter, route } from '../../middleware/route.js';

/** The account's one platform API key: POST creates or rotates, DELETE revokes. */
export function keyRoutes(deps: ApiDeps): Router {
  const router = newRouter();
  const path = '/api/auth/api-key';

  route(router, deps.config.http, { method: 'post', path: path, guard: authenticate(deps) }, async (ctx) => {
    ctx.status = 201;
    ctx.body = await createOrRotateKey(deps, authOf(ctx).accountId);
    ctx.set('Cache-Control', 'no-store'); // the raw key is in this body, once
  });

  route(router, deps.config.http, { method: 'delete', path: path, guard: authenticate(deps) }, async (ctx) => {
    await revokeKey(deps, authOf(ctx).accountId);
    ctx.status = 204;
  });

  return router;
}
