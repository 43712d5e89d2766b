import type Router from '@koa/router';
import type { ApiDeps } from '../../deps.js';
import { buildOpenApiDocument } from './document.js';
import { newRouter, publicRoute, route, routesOf } from '../../middleware/route.js';
import { Type } from '../../shapes.js';

const OPENAPI_PATH = '/api/openapi.json';

const doc = {
  operationId: 'openapi',
  tags: ['operations'],
  summary: 'This document',
  responses: { '200': { description: 'OpenAPI 3.1', schema: Type.Unsafe<Record<string, unknown>>({ type: 'object' }) } },
};

/**
 * GET /api/openapi.json: the document, generated once per app from the routes
 * registered on `routers` (and this one), with the shapes they were registered with.
 */
export function openApiRoutes(deps: ApiDeps, routers: Router[]): Router {
  const router = newRouter();
  let body = '';
  route(router, deps.config.http, { method: 'get', path: OPENAPI_PATH, guard: publicRoute(), doc }, (ctx) => {
    ctx.type = 'application/json';
    ctx.set('Cache-Control', 'public, max-age=300');
    ctx.set('Access-Control-Allow-Origin', '*'); // readable by API explorers on other origins; it holds no secret
    ctx.body = body;
  });
  body = JSON.stringify(buildOpenApiDocument([...routers, router].flatMap(routesOf)));
  return router;
}
