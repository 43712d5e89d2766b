import type Router from '@koa/router';
import type { ApiDeps } from '../../deps.js';
import { authenticate, authOf } from '../../middleware/auth.js';
import { ipRateSubject } from '../limits/client-ip.js';
import { normalizeAccountBody, validateLogin, validateSignup } from './schemas.js';
import { login, profile, signup } from './service.js';
import { newRouter, publicRoute, route } from '../../middleware/route.js';

export function authRoutes(deps: ApiDeps): Router {
  const router = newRouter('/api/auth');

  route(router, deps.config.http, { method: 'post', path: '/signup', guard: publicRoute() }, async (ctx) => {
    const input = validateSignup(normalizeAccountBody(ctx.request.body));
    // After validation, so fixing a typo does not spend the hourly budget; before
    // the duplicate check, so probing for taken emails does.
    await deps.limits.signup.consume(ipRateSubject(ctx.request.ip));
    ctx.status = 201;
    ctx.body = await signup(deps, input);
    ctx.set('Cache-Control', 'no-store');
  });

  route(router, deps.config.http, { method: 'post', path: '/login', guard: publicRoute() }, async (ctx) => {
    const input = validateLogin(normalizeAccountBody(ctx.request.body));
    await deps.limits.login.consume(ipRateSubject(ctx.request.ip));
    ctx.body = await login(deps, input);
    ctx.set('Cache-Control', 'no-store');
  });

  route(router, deps.config.http, { method: 'get', path: '/me', guard: authenticate(deps) }, async (ctx) => {
    ctx.body = { user: await profile(deps, authOf(ctx).userId) };
  });

  return router;
}
