import type Router from '@koa/router';
import type { ApiDeps } from '../../deps.js';
import { authenticate, authOf } from '../../middleware/auth.js';
import { newRouter, route } from '../../middleware/route.js';
import { errors } from '../../shapes.js';
import {
  DeliverySearchQuery,
  deliverySearchQuery,
  DeliverySearchSchema,
  EventDeliveriesSchema,
  EventIdParams,
  MAX_EVENT_ATTEMPTS,
  MAX_EVENT_DELIVERIES,
  MAX_STATS_ATTEMPTS,
  SEARCH_DEFAULT_LIMIT,
  SEARCH_MAX_LIMIT,
  SEARCH_MAX_SCAN,
  StatsQuery,
  statsQuery,
  WebhookStatsSchema,
} from './schemas.js';
import { searchDeliveries } from './search.js';
import { WebhookIdParams } from '../webhooks/index.js';
import { eventDeliveries, webhookStats } from './service.js';

/**
 * Read-only views of delivery activity, for the dashboard (and any client):
 * a subscription's delivery stats, and one event's deliveries with their
 * attempts. Same credentials as the routes they sit beside.
 */
export function activityRoutes(deps: ApiDeps): Router {
  const router = newRouter('/api/v1');
  const auth = authenticate(deps);

  route(router, deps.config.http, { method: 'get', path: '/webhooks/:id/stats', guard: auth,
    doc: {
      operationId: 'getWebhookStats',
      tags: ['webhooks'],
      summary: 'Delivery counts and latency of a subscription over the last hour or day',
      description: `Computed from the stored attempts of the window, at most the ${MAX_STATS_ATTEMPTS} most recent (\`truncated\` says when more were left out). Each attempt counts once, in the bucket of its start: as \`succeeded\`, \`retrying\` or \`failed\`.`,
      params: WebhookIdParams,
      query: StatsQuery,
      responses: { '200': { description: 'The stats', schema: WebhookStatsSchema }, ...errors(400, 401, 404, 429, 503) },
    },
  }, async (ctx) => {
    const query = statsQuery({ ...ctx.query });
    ctx.body = await webhookStats(deps, authOf(ctx).accountId, ctx.params.id as string, query.window);
  });

  route(router, deps.config.http, { method: 'get', path: '/events/:id/deliveries', guard: auth,
    doc: {
      operationId: 'getEventDeliveries',
      tags: ['events'],
      summary: 'One event with its deliveries and their attempts',
      description: `The event as polling returns it, and each delivery made for it (one per subscription it matched) with its state and attempts (status, duration, outcome). At most ${MAX_EVENT_DELIVERIES} deliveries and ${MAX_EVENT_ATTEMPTS} attempts. An event acknowledged a moment ago is found before it is written to history (503 with Retry-After, never 404, while this process cannot yet see it).`,
      params: EventIdParams,
      responses: { '200': { description: 'The event and its deliveries', schema: EventDeliveriesSchema }, ...errors(401, 404, 429, 503) },
    },
  }, async (ctx) => {
    ctx.body = await eventDeliveries(deps, authOf(ctx).accountId, ctx.params.id as string);
  });

  route(router, deps.config.http, { method: 'get', path: '/deliveries', guard: auth,
    doc: {
      operationId: 'searchDeliveries',
      tags: ['webhooks'],
      summary: "Search the delivery attempts of all the account's subscriptions",
      description: `Attempts newest first, filtered by \`outcome\`, \`status\` (\`404\`, \`5xx\`, \`400-429\`), \`event_type\`, \`webhook_id\` and the time \`[from, to)\` of the attempt; every filter given must hold. ${SEARCH_DEFAULT_LIMIT} attempts per page by default, at most ${SEARCH_MAX_LIMIT}. Each request examines at most ${SEARCH_MAX_SCAN} stored attempts of the range, so a page can hold fewer than \`limit\` (even none) and still have a \`next_cursor\`: keep paging until it is null. The cursor resumes strictly after the last attempt examined, on any API process. Attempts are kept WEBHOOK_RETENTION_DAYS (30 days by default).`,
      query: DeliverySearchQuery,
      responses: { '200': { description: 'One page of matching attempts', schema: DeliverySearchSchema }, ...errors(400, 401, 404, 429, 503) },
    },
  }, async (ctx) => {
    const query = deliverySearchQuery({ ...ctx.query });
    ctx.body = await searchDeliveries(deps, authOf(ctx).accountId, query);
  });

  return router;
}
