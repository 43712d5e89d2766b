import type Router from '@koa/router';
import type { ApiDeps } from '../../deps.js';
import { authenticate, authOf } from '../../middleware/auth.js';
import { resolveSince } from '../events/service.js';
import { parseTypes, streamQuery } from './schemas.js';
import { createStreamToken, prepareStream } from './service.js';
import { verifyStreamToken } from './tokens.js';
import { setRateHeaders } from '../limits/limiter.js';
import { guard, newRouter, route } from '../../middleware/route.js';

/**
 * POST /api/v1/events/stream-token (session or API key) and
 * GET /api/v1/events/stream?token=svcst_…[&types=a,b][&since=cursor] (server-sent events).
 */
export function streamRoutes(deps: ApiDeps): Router {
  const router = newRouter('/api/v1/events');

  route(router, deps.config.http, { method: 'post', path: '/stream-token', guard: authenticate(deps) }, (ctx) => {
    ctx.status = 201;
    // PUBLIC_BASE_URL, or a relative URL: never the request's Host or X-Forwarded-Host,
    // which a client (or a cache keyed without them) could point anywhere.
    ctx.body = createStreamToken(deps, authOf(ctx).accountId, deps.config.http.publicBaseUrl ?? '');
    ctx.set('Cache-Control', 'no-store');
  });

  // The token is the guard: without a valid one nothing else about the request is looked at.
  // Each open then spends one request of the account's API budget (100 per minute, the
  // limiter keyed by account id), like any other call: reconnecting in a loop is throttled.
  const streamToken = guard('stream_token', async (ctx) => {
    const accountId = verifyStreamToken(deps.streams.tokenKey, ctx.query.token, deps.clock());
    ctx.state.streamAccountId = accountId;
    setRateHeaders(ctx, await deps.limits.apiKey.consume(accountId));
  });
  route(router, deps.config.http, { method: 'get', path: '/stream', guard: streamToken }, async (ctx) => {
    const accountId = ctx.state.streamAccountId as string;
    const q = streamQuery({ ...ctx.query });
    const types = parseTypes(q.types);
    // EventSource sends Last-Event-ID when it reconnects by itself; it wins over a `since` left in the URL.
    const lastEventId = ctx.get('Last-Event-ID');
    const since = lastEventId ? resolveSince(deps, accountId, lastEventId, 'Last-Event-ID') : q.since ? resolveSince(deps, accountId, q.since, 'since') : null;

    const stream = await prepareStream(deps, accountId, { types, since });
    const abort = new AbortController();
    ctx.res.once('close', () => abort.abort());
    if (ctx.res.destroyed) {
      await stream.abandon();
      return;
    }
    // From here the response is ours, not Koa's: headers and bytes go out as they are written.
    ctx.respond = false;
    ctx.status = 200;
    const end = await stream.run(ctx.res, abort.signal);
    deps.log.info({ request_id: ctx.state.requestId, account_id: accountId, end }, 'stream closed');
  });

  return router;
}
