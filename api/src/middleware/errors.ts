import type { Context, Next } from 'koa';
import { AppError, errorBody, type ErrorCode } from '#shared/errors/index.js';
import { unavailableFrom } from '#shared/errors/dependency.js';
import type { Logger } from '#shared/log.js';
import { parkedOf } from '../live/held.js';

/** Errors thrown by koa-body / co-body / http-errors carry a status and a type. */
function fromHttpError(err: { status?: number; statusCode?: number; type?: string; expose?: boolean; message?: string }): AppError | null {
  const status = err.status ?? err.statusCode;
  if (typeof status !== 'number' || status < 400 || status >= 500) return null;
  if (status === 413) return new AppError('payload_too_large', 'Request body is larger than the allowed limit');
  if (status === 415) return new AppError('unsupported_media_type', 'Unsupported content type or charset');
  if (status === 400 && (err.type === 'entity.parse.failed' || /json/i.test(err.message ?? ''))) {
    return new AppError('invalid_json', 'Request body is not valid JSON');
  }
  const byStatus: Record<number, ErrorCode> = { 400: 'bad_request', 401: 'unauthorized', 403: 'forbidden', 404: 'not_found', 405: 'method_not_allowed', 409: 'conflict' };
  const code = byStatus[status] ?? 'bad_request';
  return new AppError(code, err.expose && err.message ? err.message : 'Bad request');
}

/**
 * What the routers leave without a body: no route for the path (404), a method the path
 * does not take (405), or a method no router knows at all, TRACE or QUERY (501). The routers'
 * allowedMethods() set the last two with Allow, the methods the path takes, which stays.
 */
function unanswered(ctx: Context): void {
  if (ctx.response.get('Allow') === '') ctx.remove('Allow'); // a 501 on a path no route has
  if (ctx.status === 404) throw new AppError('not_found', `No route for ${ctx.method} ${ctx.path}`);
  if (ctx.status === 405) throw new AppError('method_not_allowed', `${ctx.method} is not allowed on ${ctx.path}`);
  if (ctx.status === 501) throw new AppError('not_implemented', `${ctx.method} is not a method this service implements`);
}

/**
 * First in the chain: renders every failure as
 * `{"error":{"code","message","request_id","details"?}}`. Unexpected errors are
 * logged with their stack and answered with a 500 that exposes nothing.
 */
export function errorMiddleware(log: Logger) {
  return async function renderErrors(ctx: Context, next: Next): Promise<void> {
    try {
      await next();
      if (ctx.body === undefined) unanswered(ctx);
    } catch (raw) {
      let err: AppError;
      const down = raw instanceof AppError ? null : unavailableFrom(raw);
      if (raw instanceof AppError) err = raw;
      else if (down) {
        log.warn({ err: raw, request_id: ctx.state.requestId }, 'dependency unavailable');
        err = down;
      } else {
        err = fromHttpError(raw as object) ?? new AppError('internal', 'Internal server error');
        if (err.code === 'internal') log.error({ err: raw, request_id: ctx.state.requestId, path: ctx.path }, 'unhandled error');
      }
      if (ctx.headerSent || !ctx.writable) return;
      ctx.status = err.status;
      for (const [name, value] of Object.entries(err.headers)) ctx.set(name, value);
      ctx.body = errorBody(err, String(ctx.state.requestId ?? ''));
      // A handler that parked and then failed (it should not): Koa no longer writes the response.
      const parked = parkedOf(ctx);
      if (parked) parked.end(err.status, ctx.body);
    }
  };
}
