import { randomUUID } from 'node:crypto';
import type { Context, Next } from 'koa';
import type { Logger } from '../../../shared/src/log.js';

const SAFE_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** Gives every request an id (echoing a sane incoming X-Request-Id) and logs it once done. */
export function requestContext(log: Logger) {
  return async function withRequestContext(ctx: Context, next: Next): Promise<void> {
    const incoming = ctx.get('X-Request-Id');
    const requestId = SAFE_ID.test(incoming) ? incoming : randomUUID();
    ctx.state.requestId = requestId;
    ctx.set('X-Request-Id', requestId);
    const started = performance.now();
    try {
      await next();
    } finally {
      const ms = Math.round((performance.now() - started) * 10) / 10;
      // Streams and long-polls log on completion too; their duration is the point.
      log.info({ request_id: requestId, method: ctx.method, path: ctx.path, status: ctx.status, ms }, 'request');
    }
  };
}
