import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type Router from '@koa/router';
import type { ApiDeps } from '../../deps.js';
import { newRouter, publicRoute, route } from '../../middleware/route.js';
import { Type } from '../../shapes.js';

const STATIC_DIR = join(dirname(fileURLToPath(import.meta.url)), 'static');

const FILES: Record<string, { file: string; type: string; operationId: string; summary: string }> = {
  '/dashboard': { file: 'index.html', type: 'text/html; charset=utf-8', operationId: 'dashboard', summary: 'The dashboard page (sign up or log in, API key, webhooks, live feed)' },
  '/dashboard/app.js': { file: 'app.js', type: 'text/javascript; charset=utf-8', operationId: 'dashboardScript', summary: "The dashboard's script" },
  '/dashboard/app.css': { file: 'app.css', type: 'text/css; charset=utf-8', operationId: 'dashboardStyles', summary: "The dashboard's styles" },
  '/dashboard/favicon.svg': { file: 'favicon.svg', type: 'image/svg+xml', operationId: 'dashboardIcon', summary: "The dashboard's icon (the page links it as its favicon)" },
};

// Same-origin only, no inline script or style: the page only talks to this API.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/** The dashboard: four small static files, read once at boot. */
export function dashboardRoutes(deps: ApiDeps): Router {
  const router = newRouter();
  for (const [path, { file, type, operationId, summary }] of Object.entries(FILES)) {
    const body = readFileSync(join(STATIC_DIR, file));
    const media = type.split(';')[0] as string;
    const doc = { operationId, tags: ['dashboard'], summary, responses: { '200': { description: summary, type: media, schema: Type.String() } } };
    route(router, deps.config.http, { method: 'get', path, guard: publicRoute(), doc }, (ctx) => {
      ctx.type = type;
      ctx.set('Content-Security-Policy', CSP);
      ctx.set('X-Content-Type-Options', 'nosniff');
      ctx.set('Referrer-Policy', 'no-referrer');
      ctx.set('Cache-Control', 'no-cache');
      ctx.body = body;
    });
  }
  const slash = { operationId: 'dashboardSlash', tags: ['dashboard'], summary: 'Redirects to /dashboard', responses: { '302': { description: 'To /dashboard' } } };
  route(router, deps.config.http, { method: 'get', path: '/dashboard/', guard: publicRoute(), doc: slash }, (ctx) => ctx.redirect('/dashboard'));
  return router;
}
