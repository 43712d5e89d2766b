import type Router from '@koa/router';
import type { ApiDeps } from '../../deps.js';
import { authenticate, authOf } from '../../middleware/auth.js';
import { createOrRotateKey, revokeKey } from './service.js';
import { newRouter, route } from '../../middleware/route.js';
import { errors } from '../../shapes.js';
import { NewApiKeySchema } from './schemas.js';

/** The account's one platform API key: POST creates or rotates, DELETE revokes. */
export function keyRoutes(deps: ApiDeps): Router {
  const router = newRouter();
  const path = '/api/auth/api-key';

  route(router, deps.config.http, {
    method: 'post',
    path,
    guard: authenticate(deps),
    doc: {
      operationId: 'createApiKey',
      tags: ['accounts'],
      summary: "Create or rotate the account's API key",
      description: 'Returns the raw key once. An existing key stops working at once, on every API process.',
      responses: { '201': { description: 'The new key, shown only here', schema: NewApiKeySchema }, ...errors(401, 429, 503) },
    },
  }, async (ctx) => {
    ctx.status = 201;
    ctx.body = await createOrRotateKey(deps, authOf(ctx).accountId);
    ctx.set('Cache-Control', 'no-store'); // the raw key is in this body, once
  });

  route(router, deps.config.http, {
    method: 'delete',
    path,
    guard: authenticate(deps),
    doc: { operationId: 'revokeApiKey', tags: ['accounts'], summary: "Revoke the account's API key", responses: { '204': { description: 'Revoked' }, ...errors(401, 404, 429, 503) } },
  }, async (ctx) => {
    await revokeKey(deps, authOf(ctx).accountId);
    ctx.status = 204;
  });

  return router;
}
