import type Router from '@koa/router';
import type { ApiDeps } from '../../deps.js';
import { buildOpenApiDocument } from './document.js';
import { newRouter, publicRoute, route } from '../../middleware/route.js';

export const OPENAPI_PATH = '/api/openapi.json';

/** GET /api/openapi.json: the document, built once per app (it depends only on the configuration). */
export function openApiRoutes(deps: ApiDeps): Router {
  const router = newRouter();
  const body = JSON.stringify(buildOpenApiDocument(deps.config));
  route(router, deps.config.http, { method: 'get', path: OPENAPI_PATH, guard: publicRoute() }, (ctx) => {
    ctx.type = 'application/json';
    ctx.set('Cache-Control', 'public, max-age=300');
    ctx.set('Access-Control-Allow-Origin', '*'); // readable by API explorers on other origins; it holds no secret
    ctx.body = body;
  });
  return router;
}
