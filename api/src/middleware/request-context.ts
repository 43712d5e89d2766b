import { randomUUID } from 'node:crypto';
import type { Context, Next } from 'koa';
import type { Logger } from '#shared/log.js';
import { bindActive } from '#shared/telemetry.js';
import { parkedOf } from '../live/held.js';

const SAFE_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * A route whose successful requests are too many to log each (ingest) sets
 * this on ctx.state: 1 in N of its fast 2xx/3xx requests is logged, with
 * `sampled: N`; failures, slow requests and every request at debug level
 * are always logged.
 */
export const LOG_SAMPLE = 'logSampleEvery';
const SLOW_MS = 1000;

/**
 * Gives every request an id (echoing a sane incoming X-Request-Id) and logs it
 * once done; a parked request (live/held.ts) once its handler has
 * written it.
 */
export function requestContext(log: Logger) {
  let skipped = 0;
  const logDone = (ctx: Context, requestId: string, status: number, started: number): void => {
    const ms = Math.round((performance.now() - started) * 10) / 10;
    const every = ctx.state[LOG_SAMPLE] as number | undefined;
    if (every !== undefined && every > 1 && status < 400 && ms < SLOW_MS && !log.isLevelEnabled('debug')) {
      skipped += 1;
      if (skipped >= every) {
        skipped = 0;
        log.info({ request_id: requestId, method: ctx.method, path: ctx.path, status, ms, sampled: every }, 'request');
      }
    } else {
      // Streams and long-polls log on completion too; their duration is the point.
      log.info({ request_id: requestId, method: ctx.method, path: ctx.path, status, ms }, 'request');
    }
  };
  return async function withRequestContext(ctx: Context, next: Next): Promise<void> {
    const incoming = ctx.get('X-Request-Id');
    const requestId = SAFE_ID.test(incoming) ? incoming : randomUUID();
    ctx.state.requestId = requestId;
    ctx.set('X-Request-Id', requestId);
    const started = performance.now();
    try {
      await next();
    } finally {
      const parked = parkedOf(ctx);
      // Bound to the request's span (tracing on): the line carries its trace_id, however late it is written.
      if (parked) parked.whenDone(bindActive((status: number) => logDone(ctx, requestId, status, started)));
      else logDone(ctx, requestId, ctx.status, started);
    }
  };
}
