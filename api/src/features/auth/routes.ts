import type Router from '@koa/router';
import type { ApiDeps } from '../../deps.js';
import { authenticate, authOf } from '../../middleware/auth.js';
import { ipRateSubject } from '../limits/index.js';
import { errors } from '../../shapes.js';
import { LoginBody, normalizeAccountBody, ProfileSchema, SessionSchema, SignupBody, validateLogin, validateSignup } from './schemas.js';
import { login, profile, signup } from './service.js';
import { newRouter, publicRoute, route } from '../../middleware/route.js';

export function authRoutes(deps: ApiDeps): Router {
  const router = newRouter('/api/auth');

  route(router, deps.config.http, {
    method: 'post',
    path: '/signup',
    guard: publicRoute(),
    doc: {
      operationId: 'signup',
      tags: ['accounts'],
      summary: 'Create an account',
      description: 'Email is trimmed and lower-cased; name, phone and plan are trimmed; an empty phone or plan means none. Throttled per client IP (SIGNUP_LIMIT_PER_HOUR, 10 by default).',
      body: SignupBody,
      responses: { '201': { description: 'The account and a session token', schema: SessionSchema }, ...errors(400, 409, 413, 415, 429, 503) },
    },
  }, async (ctx) => {
    const input = validateSignup(normalizeAccountBody(ctx.request.body));
    // After validation, so fixing a typo does not spend the hourly budget; before
    // the duplicate check, so probing for taken emails does.
    await deps.limits.signup.consume(ipRateSubject(ctx.request.ip));
    ctx.status = 201;
    ctx.body = await signup(deps, input);
    ctx.set('Cache-Control', 'no-store');
  });

  route(router, deps.config.http, {
    method: 'post',
    path: '/login',
    guard: publicRoute(),
    doc: {
      operationId: 'login',
      tags: ['accounts'],
      summary: 'Get a session token',
      description:
        'Same body shape as signup: name, phone and plan are accepted and ignored. A wrong email and a wrong password get the same 401. Throttled per client IP (LOGIN_LIMIT_PER_MINUTE) and per email, existing or not, from any address (LOGIN_FAILURES_PER_ACCOUNT failed logins per LOGIN_ACCOUNT_WINDOW_S): the 429 is the same for an unknown email.',
      body: LoginBody,
      responses: { '200': { description: 'A fresh session token', schema: SessionSchema }, ...errors(400, 401, 413, 415, 429, 503) },
    },
  }, async (ctx) => {
    const input = validateLogin(normalizeAccountBody(ctx.request.body));
    await deps.limits.login.consume(ipRateSubject(ctx.request.ip));
    ctx.body = await login(deps, input);
    ctx.set('Cache-Control', 'no-store');
  });

  route(router, deps.config.http, {
    method: 'get',
    path: '/me',
    guard: authenticate(deps),
    doc: { operationId: 'getProfile', tags: ['accounts'], summary: "The caller's profile", responses: { '200': { description: 'The user object', schema: ProfileSchema }, ...errors(401, 429, 503) } },
  }, async (ctx) => {
    ctx.body = { user: await profile(deps, authOf(ctx).userId) };
  });

  return router;
}
