import type Router from '@koa/router';
import type { ApiDeps } from '../../deps.js';
import { authenticate, authOf } from '../../middleware/auth.js';
import { errors, type Static } from '../../shapes.js';
import { EventPageSchema, ListEventsQuery, WaitBody, type WaitInput, WaitResultSchema } from './schemas.js';
import { listEvents } from './service.js';
import { beginWait, PendingWait, type WaitResult } from './long-poll.js';
import { requestSpan } from '../../middleware/tracing.js';
import { newRouter, route } from '../../middleware/route.js';

/** Cursor polling and long-poll over the caller's account's events. */
export function eventRoutes(deps: ApiDeps): Router {
  const router = newRouter('/api/v1/events');
  const { longPollDefaultMs, longPollMaxMs, maxLongPollsPerAccount } = deps.config.events;

  route(router, deps.config.http, {
    method: 'get',
    path: '/',
    guard: authenticate(deps),
    doc: {
      operationId: 'listEvents',
      tags: ['events'],
      summary: "Poll the account's events after a cursor",
      description:
        'Oldest first. Pass the returned `cursor` back as `since` to continue after the last event returned. Only events already stored are returned, in log order, so a cursor never skips an event that lands later.',
      query: ListEventsQuery,
      responses: { '200': { description: 'A page of events', schema: EventPageSchema }, ...errors(400, 401, 410, 429, 503) },
    },
  }, async (ctx) => {
    const page = await listEvents(deps, authOf(ctx).accountId, ctx.query);
    deps.events.traces.link(requestSpan(), page.events.map((e) => e.id)); // tracing on: the read links to each event's trace
    ctx.body = page satisfies Static<typeof EventPageSchema>;
  });

  route(router, deps.config.http, {
    method: 'post',
    path: '/wait',
    guard: authenticate(deps),
    doc: {
      operationId: 'waitForEvent',
      tags: ['events'],
      summary: 'Long-poll for the next matching event',
      description: `Answers as soon as a matching event arrives, or with \`{"event": null, "timed_out": true}\` after \`timeout_ms\` (default ${longPollDefaultMs}, at most ${longPollMaxMs}). With \`since\`, an event already after that cursor answers at once. Loop it: the wait is capped at 55 s. At most ${maxLongPollsPerAccount} long-polls per account at once in one API process (429 beyond).`,
      body: WaitBody,
      bodyRequired: false,
      responses: { '200': { description: 'The event, or a timeout', schema: WaitResultSchema }, ...errors(400, 401, 410, 413, 415, 429, 503) },
    },
  }, async (ctx) => {
    const started = await beginWait(deps, authOf(ctx).accountId, (ctx.request.body ?? {}) as WaitInput);
    // Tracing on: the read's span links to the trace of the event it returns.
    const span = requestSpan();
    const link =
      span &&
      ((result: WaitResult): void => {
        if (result.event) deps.events.traces.link(span, [result.event.id]);
      });
    if (!(started instanceof PendingWait)) {
      link?.(started);
      ctx.body = started satisfies Static<typeof WaitResultSchema>;
      return;
    }
    // It must wait: the request leaves the middleware chain (live/held.ts) and is answered on
    // its raw response, with the bytes Koa would write; a client that leaves frees it at once.
    const parked = deps.held.park(ctx);
    started.wait(
      link
        ? {
            answer(result) {
              link(result);
              parked.answer(result);
            },
          }
        : parked,
    );
    deps.held.watch(parked, started);
  });

  return router;
}
