import type Router from '@koa/router';
import type { ApiDeps } from '../../deps.js';
import { authenticate, authOf } from '../../middleware/auth.js';
import { resolveSince } from '../events/index.js';
import { parseTypes, streamQuery, StreamQuerySchema, StreamTokenSchema } from './schemas.js';
import { errors, EventRecordSchema, type Static, Type } from '../../shapes.js';
import { createStreamToken, prepareStream } from './service.js';
import type { LiveStream } from './stream.js';
import { verifyStreamToken } from './tokens.js';
import { setRateHeaders } from '../limits/index.js';
import { guard, newRouter, route } from '../../middleware/route.js';

const SSE_EXAMPLE =
  'retry: 3000\n\nid: c1_MS40Mg\nevent: call.started\ndata: {"id":"evt_0a1b2c3d4e5f60718293a4b5","type":"call.started","created_at":"2025-01-01T12:00:00.000Z","data":{"call_id":"c_1"},"cursor":"c1_MS40Mg"}\n\n: heartbeat\n\n';

/**
 * POST /api/v1/events/stream-token (session or API key) and
 * GET /api/v1/events/stream?token=svcst_…[&types=a,b][&since=cursor] (server-sent events).
 */
export function streamRoutes(deps: ApiDeps): Router {
  const router = newRouter('/api/v1/events');
  const { tokenTtlSeconds, durationMs, maxPerAccount, heartbeatMs } = deps.config.streams;

  route(router, deps.config.http, {
    method: 'post',
    path: '/stream-token',
    guard: authenticate(deps),
    doc: {
      operationId: 'createStreamToken',
      tags: ['events'],
      summary: 'Mint a short-lived token for the stream URL',
      description: `A \`svcst_\` token bound to the account, valid ${tokenTtlSeconds} s, usable only as the \`token\` query parameter of the stream URL.`,
      responses: { '201': { description: 'The token and a ready stream URL', schema: StreamTokenSchema }, ...errors(401, 429, 503) },
    },
  }, (ctx) => {
    ctx.status = 201;
    // PUBLIC_BASE_URL, or a relative URL: never the request's Host or X-Forwarded-Host,
    // which a client (or a cache keyed without them) could point anywhere.
    ctx.body = createStreamToken(deps, authOf(ctx).accountId, deps.config.http.publicBaseUrl ?? '') satisfies Static<typeof StreamTokenSchema>;
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
  route(router, deps.config.http, {
    method: 'get',
    path: '/stream',
    guard: streamToken,
    doc: {
      operationId: 'streamEvents',
      tags: ['events'],
      summary: "Server-sent event stream of the account's events",
      description: `Runs about ${Math.round(durationMs / 1000)} s, then closes; reconnect with a fresh token (EventSource resumes by Last-Event-ID). At most ${maxPerAccount} concurrent streams per account; each open counts as one request against the account's API rate limit. Each event is framed as \`id: <cursor>\`, \`event: <type>\`, \`data: <EventRecord JSON>\`; \`: heartbeat\` comments every ${Math.round(heartbeatMs / 1000)} s.`,
      query: StreamQuerySchema,
      headers: [{ name: 'Last-Event-ID', in: 'header', required: false, description: 'Sent by EventSource on reconnect: resume after this cursor (wins over `since`)', schema: { type: 'string' } }],
      responses: {
        '200': {
          description: 'The event stream',
          type: 'text/event-stream',
          schema: Type.String({ description: 'Server-sent events; each `data:` line is one EventRecord as JSON' }),
          media: { example: SSE_EXAMPLE, 'x-event-schema': EventRecordSchema },
        },
        ...errors(400, 401, 429, 503),
      },
    },
  }, async (ctx) => {
    const accountId = ctx.state.streamAccountId as string;
    const q = streamQuery({ ...ctx.query });
    const types = parseTypes(q.types);
    // EventSource sends Last-Event-ID when it reconnects by itself; it wins over a `since` left in the URL.
    const lastEventId = ctx.get('Last-Event-ID');
    const since = lastEventId ? resolveSince(deps, accountId, lastEventId, 'Last-Event-ID') : q.since ? resolveSince(deps, accountId, q.since, 'since') : null;

    const stream = await prepareStream(deps, accountId, { types, since });
    if (ctx.res.destroyed) {
      await stream.abandon();
      return;
    }
    // From here the response is ours, not Koa's (live/held.ts): headers and bytes go out as they
    // are written, and the chain returns (a stream that runs for minutes holds none of its frames).
    const parked = deps.held.park(ctx);
    let live: LiveStream;
    try {
      live = stream.start(parked, ctx.state.requestId);
    } catch (err) {
      deps.log.error({ err, request_id: ctx.state.requestId, path: ctx.path }, 'unhandled error');
      parked.end(500);
      return;
    }
    deps.held.watch(parked, live);
  });

  return router;
}
