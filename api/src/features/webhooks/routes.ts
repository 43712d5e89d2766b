import type Router from '@koa/router';
import type { ApiDeps } from '../../deps.js';
import { authenticate, authOf } from '../../middleware/auth.js';
import { attemptsQuery, createWebhookBody, rotateSecretBody, updateWebhookBody } from './schemas.js';
import { createWebhook, deleteWebhook, getWebhook, listDeliveries, listWebhooks, pingWebhook, revealSecret, rotateSecret, updateWebhook } from './service.js';
import { newRouter, route } from '../../middleware/route.js';

/** Webhook subscriptions of the caller's account (docs/spec.md section 4, Webhooks). */
export function webhookRoutes(deps: ApiDeps): Router {
  const router = newRouter('/api/v1/webhooks');
  const auth = authenticate(deps);

  route(router, deps.config.http, { method: 'get', path: '/', guard: auth }, async (ctx) => {
    ctx.body = await listWebhooks(deps, authOf(ctx).accountId);
  });

  route(router, deps.config.http, { method: 'post', path: '/', guard: auth }, async (ctx) => {
    const input = createWebhookBody(ctx.request.body);
    ctx.status = 201;
    ctx.body = await createWebhook(deps, authOf(ctx).accountId, input);
    ctx.set('Cache-Control', 'no-store'); // the secret is in this body
  });

  route(router, deps.config.http, { method: 'get', path: '/:id', guard: auth }, async (ctx) => {
    ctx.body = await getWebhook(deps, authOf(ctx).accountId, ctx.params.id as string);
  });

  route(router, deps.config.http, { method: 'patch', path: '/:id', guard: auth }, async (ctx) => {
    const input = updateWebhookBody(ctx.request.body);
    ctx.body = await updateWebhook(deps, authOf(ctx).accountId, ctx.params.id as string, input);
  });

  route(router, deps.config.http, { method: 'delete', path: '/:id', guard: auth }, async (ctx) => {
    await deleteWebhook(deps, authOf(ctx).accountId, ctx.params.id as string);
    ctx.status = 204;
  });

  route(router, deps.config.http, { method: 'post', path: '/:id/secret', guard: auth }, async (ctx) => {
    ctx.body = await revealSecret(deps, authOf(ctx).accountId, ctx.params.id as string);
    ctx.set('Cache-Control', 'no-store');
  });

  route(router, deps.config.http, { method: 'post', path: '/:id/secret/rotate', guard: auth }, async (ctx) => {
    const input = rotateSecretBody(ctx.request.body ?? {});
    ctx.body = await rotateSecret(deps, authOf(ctx).accountId, ctx.params.id as string, input);
    ctx.set('Cache-Control', 'no-store');
  });

  route(router, deps.config.http, { method: 'post', path: '/:id/ping', guard: auth }, async (ctx) => {
    ctx.status = 202;
    ctx.body = await pingWebhook(deps, authOf(ctx).accountId, ctx.params.id as string);
  });

  route(router, deps.config.http, { method: 'get', path: '/:id/deliveries', guard: auth }, async (ctx) => {
    const query = attemptsQuery({ ...ctx.query });
    ctx.body = await listDeliveries(deps, authOf(ctx).accountId, ctx.params.id as string, query);
  });

  return router;
}
