import type Router from '@koa/router';
import type { ApiDeps } from '../../deps.js';
import { authenticate, authOf } from '../../middleware/auth.js';
import {
  AttemptsQuery,
  attemptsQuery,
  CreateWebhookBody,
  createWebhookBody,
  DEFAULT_GRACE_PERIOD_S,
  MAX_GRACE_PERIOD_S,
  RotateSecretBody,
  rotateSecretBody,
  DeliveryAttemptListSchema,
  UpdateWebhookBody,
  updateWebhookBody,
  WebhookIdParams,
  WebhookListSchema,
  WebhookPingSchema,
  WebhookSchema,
  WebhookSecretRotationSchema,
  WebhookSecretSchema,
  WebhookWithSecretSchema,
} from './schemas.js';
import { createWebhook, deleteWebhook, getWebhook, listDeliveries, listWebhooks, pingWebhook, revealSecret, rotateSecret, updateWebhook } from './service.js';
import { newRouter, route, type RouteDoc } from '../../middleware/route.js';
import { checkOpKey, OP_KEY_TTL_MS, runOnce } from './op-keys.js';
import { operationLimits } from './op-admission.js';
import { recoverDeliveries, replayEvents, resendDelivery } from './operations.js';
import {
  DeliveryIdParams,
  MAX_RECOVER_DELIVERIES,
  MAX_REPLAY_EVENTS,
  RecoverBody,
  recoverBody,
  RecoverResultSchema,
  ReplayBody,
  replayBody,
  ReplayResultSchema,
  ResendResultSchema,
} from './schemas.js';
import { errors, type Static } from '../../shapes.js';

/** Webhook subscriptions of the caller's account (docs/spec.md section 4, Webhooks). */
export function webhookRoutes(deps: ApiDeps): Router {
  const router = newRouter('/api/v1/webhooks');
  const auth = authenticate(deps);
  const op = (operationId: string, summary: string, rest: Omit<RouteDoc, 'operationId' | 'tags' | 'summary'>): RouteDoc => ({ operationId, tags: ['webhooks'], summary, ...rest });
  const one = (operationId: string, summary: string, rest: Omit<RouteDoc, 'operationId' | 'tags' | 'summary'>): RouteDoc => op(operationId, summary, { params: WebhookIdParams, ...rest });
  const { maxPerAccount, dns } = deps.config.webhooks;

  route(router, deps.config.http, { method: 'get', path: '/', guard: auth,
    doc: op('listWebhooks', "List the account's subscriptions", { responses: { '200': { description: 'The subscriptions', schema: WebhookListSchema }, ...errors(401, 429, 503) } }),
  }, async (ctx) => {
    ctx.body = (await listWebhooks(deps, authOf(ctx).accountId)) satisfies Static<typeof WebhookListSchema>;
  });

  route(router, deps.config.http, { method: 'post', path: '/', guard: auth,
    doc: op('createWebhook', 'Subscribe an HTTPS endpoint', {
      description: `The URL must be HTTPS and resolve only to public addresses (loopback, private, link-local, CGNAT, multicast and reserved addresses are refused, here and again at every delivery), on port 443, 8443 or one the deployment allows (WEBHOOK_ALLOWED_PORTS); a refusal names the rule broken, never the address a name resolved to. 429 when the account already has ${dns.maxLookupsPerAccount} URL checks waiting for DNS. \`events\` is exactly \`["*"]\` or a list of types. \`headers\`: custom headers sent on every attempt, stored encrypted and shown masked (\`"X-Api-Key": "****"\`) in every answer; the service's own headers and hop-by-hop ones are a 400 naming the header. At most ${maxPerAccount} per account (409). The secret is in this response; it can be shown again with POST …/secret.`,
      body: CreateWebhookBody,
      responses: { '201': { description: 'The subscription, with its signing secret', schema: WebhookWithSecretSchema }, ...errors(400, 401, 409, 413, 415, 429, 503) },
    }),
  }, async (ctx) => {
    const input = createWebhookBody(ctx.request.body);
    ctx.status = 201;
    ctx.body = (await createWebhook(deps, authOf(ctx).accountId, input)) satisfies Static<typeof WebhookWithSecretSchema>;
    ctx.set('Cache-Control', 'no-store'); // the secret is in this body
  });

  route(router, deps.config.http, { method: 'get', path: '/:id', guard: auth,
    doc: one('getWebhook', 'One subscription, with its last delivery status', { responses: { '200': { description: 'The subscription', schema: WebhookSchema }, ...errors(401, 404, 429, 503) } }),
  }, async (ctx) => {
    ctx.body = (await getWebhook(deps, authOf(ctx).accountId, ctx.params.id as string)) satisfies Static<typeof WebhookSchema>;
  });

  route(router, deps.config.http, { method: 'patch', path: '/:id', guard: auth,
    doc: one('updateWebhook', "Change a subscription's url, events, description, enabled, rate limit or headers", {
      description:
        'Any of the fields, at least one; an unknown field is a 400 naming it. A new `url` is checked as on POST: HTTPS, the port policy, public addresses only; a refusal names the rule broken; 429 when the account has too many URL checks waiting for DNS. Once this answers, every send uses the new values: `enabled: false` stops all sending, and deliveries already queued or waiting to be retried are given up unsent (never sent later); `enabled: true` after a disable delivers the events that occur from then on, not those of the time it was disabled; new `headers` replace the whole set (`{}` removes them) and are sent on every attempt from then on, queued retries included. The secret is unchanged and not in this response.',
      body: UpdateWebhookBody,
      responses: { '200': { description: 'The subscription as now stored', schema: WebhookSchema }, ...errors(400, 401, 404, 413, 415, 429, 503) },
    }),
  }, async (ctx) => {
    const input = updateWebhookBody(ctx.request.body);
    ctx.body = (await updateWebhook(deps, authOf(ctx).accountId, ctx.params.id as string, input)) satisfies Static<typeof WebhookSchema>;
  });

  route(router, deps.config.http, { method: 'delete', path: '/:id', guard: auth,
    doc: one('deleteWebhook', 'Delete a subscription', {
      description: 'Its pending deliveries are dropped and its attempt log removed.',
      responses: { '204': { description: 'Deleted' }, ...errors(401, 404, 429, 503) },
    }),
  }, async (ctx) => {
    await deleteWebhook(deps, authOf(ctx).accountId, ctx.params.id as string);
    ctx.status = 204;
  });

  route(router, deps.config.http, { method: 'post', path: '/:id/secret', guard: auth,
    doc: one('revealWebhookSecret', 'Show the signing secret again', { responses: { '200': { description: 'The secret', schema: WebhookSecretSchema }, ...errors(401, 404, 429, 503) } }),
  }, async (ctx) => {
    ctx.body = (await revealSecret(deps, authOf(ctx).accountId, ctx.params.id as string)) satisfies Static<typeof WebhookSecretSchema>;
    ctx.set('Cache-Control', 'no-store');
  });

  route(router, deps.config.http, { method: 'post', path: '/:id/secret/rotate', guard: auth,
    doc: one('rotateWebhookSecret', 'Replace the signing secret, keeping the old one valid for a grace period', {
      description: `Makes a new \`whsec_\` secret and answers it (POST …/secret shows it from now on). For \`grace_period_s\` (default ${DEFAULT_GRACE_PERIOD_S}, 24 h; 0 to ${MAX_GRACE_PERIOD_S}, 7 days) every delivery also carries a signature made with the replaced secret: \`webhook-signature\` lists one \`v1,\` value per secret, space-separated, so a Standard Webhooks verifier holding either secret accepts it; \`X-Service-Signature\` is made with the new secret only. After the grace period (or at once with 0) the replaced secret signs nothing. At most two secrets: rotating again during a grace period drops the oldest at once. Two rotations of one subscription at the same moment: one succeeds, the other answers 409. No body (or \`{}\`) takes the default.`,
      body: RotateSecretBody,
      bodyRequired: false,
      responses: { '200': { description: 'The new secret', schema: WebhookSecretRotationSchema }, ...errors(400, 401, 404, 409, 413, 415, 429, 503) },
    }),
  }, async (ctx) => {
    const input = rotateSecretBody(ctx.request.body ?? {});
    ctx.body = (await rotateSecret(deps, authOf(ctx).accountId, ctx.params.id as string, input)) satisfies Static<typeof WebhookSecretRotationSchema>;
    ctx.set('Cache-Control', 'no-store');
  });

  route(router, deps.config.http, { method: 'post', path: '/:id/ping', guard: auth,
    doc: one('pingWebhook', 'Send a webhook.ping to this subscription', {
      description:
        "Appends a `webhook.ping` event to the log (polling, long-poll and streams see it too); the delivery process sends it to this subscription only. Answers once the event is durable, not when it is delivered: follow it with GET …/deliveries or the subscription's last_status.",
      responses: { '202': { description: 'The ping event is in the log', schema: WebhookPingSchema }, ...errors(401, 404, 429, 503) },
    }),
  }, async (ctx) => {
    ctx.status = 202;
    ctx.body = (await pingWebhook(deps, authOf(ctx).accountId, ctx.params.id as string)) satisfies Static<typeof WebhookPingSchema>;
  });

  route(router, deps.config.http, { method: 'get', path: '/:id/deliveries', guard: auth,
    doc: one('listWebhookDeliveries', 'Recent delivery attempts of a subscription', {
      query: AttemptsQuery,
      responses: { '200': { description: 'Attempts, newest first', schema: DeliveryAttemptListSchema }, ...errors(400, 401, 404, 429, 503) },
    }),
  }, async (ctx) => {
    const query = attemptsQuery({ ...ctx.query });
    ctx.body = (await listDeliveries(deps, authOf(ctx).accountId, ctx.params.id as string, query)); // Attempt.event_type is typed string in service.ts (the shape says EventType): not checked at compile time
  });

  // Resend, recover, replay: idempotent per Idempotency-Key (op-keys.ts).
  const keyHeader = [
    {
      name: 'Idempotency-Key',
      in: 'header',
      required: false,
      description: `A repeat with the same key within ${OP_KEY_TTL_MS / 3_600_000} h (per account and operation) answers the first call's answer (\`Idempotent-Replayed: true\`) and queues nothing; the same key with another subscription, delivery or body is a 409; while the first call runs, 409 with Retry-After. 1 to 255 visible ASCII characters.`,
      schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x21-\\x7e]+$' },
    },
  ];
  const limitsNote = ` 429 (naming the limit, with Retry-After; nothing queued) when the call would take the account past ${operationLimits.maxPending} pending resend, recover and replay deliveries, or past ${operationLimits.perMinute} of them queued per minute.`;
  const replayedHeader = { 'Idempotent-Replayed': { description: '`true` when this is the answer of an earlier call with the same Idempotency-Key (nothing queued now)', schema: { const: 'true' } } };

  route(router, deps.config.http, { method: 'post', path: '/:id/deliveries/:delivery_id/resend', guard: auth,
    doc: op('resendWebhookDelivery', 'Send one delivery again, now', {
      description:
        "Queues the delivery again, whatever its state (succeeded, failed, still retrying), as a new delivery with its own id (X-Service-Delivery, webhook-id) and the same body (the same event id: receivers dedupe on it); it is sent within the delivery process's polling interval and retried on failure like any delivery. Its attempts have `trigger: \"resend\"` in GET …/deliveries and GET /api/v1/events/{id}/deliveries. 404 for a delivery of another subscription or account; 409 when the subscription is disabled." + limitsNote,
      params: DeliveryIdParams,
      headers: keyHeader,
      responses: { '202': { description: 'Queued', schema: ResendResultSchema, headers: replayedHeader }, ...errors(400, 401, 404, 409, 429, 503) },
    }),
  }, async (ctx) => {
    const accountId = authOf(ctx).accountId;
    const { id, delivery_id: deliveryId } = ctx.params as { id: string; delivery_id: string };
    const key = checkOpKey(ctx.headers['idempotency-key']);
    const { result, replayed } = await runOnce(deps, { accountId, op: 'resend', key, request: { id, deliveryId } }, (seed) => resendDelivery(deps, accountId, id, deliveryId, seed));
    if (replayed) ctx.set('Idempotent-Replayed', 'true');
    ctx.status = 202;
    ctx.body = result satisfies Static<typeof ResendResultSchema>;
  });

  route(router, deps.config.http, { method: 'post', path: '/:id/recover', guard: auth,
    doc: one('recoverWebhookDeliveries', 'Send again every failed delivery since a time', {
      description: `Queues again (trigger \`recover\`) every delivery of this subscription created at or after \`since\` (at most 30 days ago) that failed for good: one new delivery per event, none for an event already delivered or on its way (recovering twice does not send twice). Looks at ${MAX_RECOVER_DELIVERIES} failed deliveries per call at most, oldest first: \`truncated\` then says to call again with \`since\` = \`next_since\` and \`after_id\` = \`next_after_id\`. The recovery of an event has an id derived from its newest failed delivery, so two recovers at once queue it once. 409 when the subscription is disabled.${limitsNote}`,
      body: RecoverBody,
      headers: keyHeader,
      responses: { '202': { description: 'Queued', schema: RecoverResultSchema, headers: replayedHeader }, ...errors(400, 401, 404, 409, 413, 415, 429, 503) },
    }),
  }, async (ctx) => {
    const accountId = authOf(ctx).accountId;
    const id = ctx.params.id as string;
    const key = checkOpKey(ctx.headers['idempotency-key']);
    const input = recoverBody(ctx.request.body);
    const { result, replayed } = await runOnce(deps, { accountId, op: 'recover', key, request: { id, input } }, () => recoverDeliveries(deps, accountId, id, input));
    if (replayed) ctx.set('Idempotent-Replayed', 'true');
    ctx.status = 202;
    ctx.body = result satisfies Static<typeof RecoverResultSchema>;
  });

  route(router, deps.config.http, { method: 'post', path: '/:id/replay', guard: auth,
    doc: one('replayWebhookEvents', "Deliver the account's events from a cursor to this subscription", {
      description: `Every event of the account strictly after \`since\` and up to \`until\` (included; without it, the last event stored now) whose type this subscription takes is queued for it (trigger \`replay\`), in log order, events older than the subscription included. The cursors are polling's (GET /api/v1/events). At most ${MAX_REPLAY_EVENTS} events per call: \`cursor\` says where it stopped and \`truncated\` that there is more: call again with \`since\` = \`cursor\`. Deliveries are sent concurrently like all deliveries: they are due in log order, but may arrive out of it (each body carries its cursor). 409 when the subscription is disabled.${limitsNote}`,
      body: ReplayBody,
      headers: keyHeader,
      responses: { '202': { description: 'Queued', schema: ReplayResultSchema, headers: replayedHeader }, ...errors(400, 401, 404, 409, 413, 415, 429, 503) },
    }),
  }, async (ctx) => {
    const accountId = authOf(ctx).accountId;
    const id = ctx.params.id as string;
    const key = checkOpKey(ctx.headers['idempotency-key']);
    const input = replayBody(ctx.request.body);
    const { result, replayed } = await runOnce(deps, { accountId, op: 'replay', key, request: { id, input } }, (seed) => replayEvents(deps, accountId, id, input, seed));
    if (replayed) ctx.set('Idempotent-Replayed', 'true');
    ctx.status = 202;
    ctx.body = result satisfies Static<typeof ReplayResultSchema>;
  });

  return router;
}
