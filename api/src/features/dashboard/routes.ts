import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type Router from '@koa/router';
import type { ApiDeps } from '../../deps.js';
import { newRouter, publicRoute, route } from '../../middleware/route.js';

const STATIC_DIR = join(dirname(fileURLToPath(import.meta.url)), 'static');

const FILES: Record<string, { file: string; type: string }> = {
  '/dashboard': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/dashboard/app.js': { file: 'app.js', type: 'text/javascript; charset=utf-8' },
  '/dashboard/app.css': { file: 'app.css', type: 'text/css; charset=utf-8' },
};

// Same-origin only, no inline script or style: the page only talks to this API.
const CSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/** The dashboard: three small static files, read once at boot. */
export function dashboardRoutes(deps: ApiDeps): Router {
  const router = newRouter();
  const cache = new Map(Object.entries(FILES).map(([path, f]) => [path, { body: readFileSync(join(STATIC_DIR, f.file)), type: f.type }]));
  for (const [path, { body, type }] of cache) {
    route(router, deps.config.http, { method: 'get', path: path, guard: publicRoute() }, (ctx) => {
      ctx.type = type;
      ctx.set('Content-Security-Policy', CSP);
      ctx.set('X-Content-Type-Options', 'nosniff');
      ctx.set('Referrer-Policy', 'no-referrer');
      ctx.set('Cache-Control', 'no-cache');
      ctx.body = body;
    });
  }
  route(router, deps.config.http, { method: 'get', path: '/dashboard/', guard: publicRoute() }, (ctx) => ctx.redirect('/dashboard'));
  return router;
}
