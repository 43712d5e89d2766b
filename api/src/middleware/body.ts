import type { Context, Next } from 'koa';
import { koaBody } from 'koa-body';
import { AppError } from '../../../shared/src/errors/index.js';

const METHODS_WITH_BODY = new Set(['POST', 'PUT', 'PATCH']);

function parser(limit: string) {
  return koaBody({
    json: true,
    jsonStrict: true,
    jsonLimit: limit,
    urlencoded: false,
    text: false,
    multipart: false,
    includeUnparsed: false,
  });
}

const parsers = new Map<string, (ctx: Context, next: Next) => Promise<void>>();

/**
 * JSON bodies only, mounted per route after its guard (see route.ts). A body of
 * another type is refused with 415 rather than silently read as empty.
 */
export function jsonParser(limit: string): (ctx: Context, next: Next) => Promise<void> {
  const cached = parsers.get(limit);
  if (cached) return cached;
  const run = parser(limit);
  const parseJson = async (ctx: Context, next: Next): Promise<void> => {
    if (!METHODS_WITH_BODY.has(ctx.method)) return next();
    const hasBody = Number(ctx.get('Content-Length') || '0') > 0 || ctx.get('Transfer-Encoding') !== '';
    if (hasBody && !ctx.is('application/json', 'application/*+json')) {
      throw new AppError('unsupported_media_type', 'Request body must be application/json');
    }
    let parsed = false;
    try {
      await run(ctx, () => {
        parsed = true;
        return next();
      });
    } catch (err) {
      // Failing before the body was parsed without an HTTP status means the bytes could not be
      // decoded: a zlib/brotli error from a body that does not match its Content-Encoding.
      if (parsed || hasHttpStatus(err)) throw err;
      throw new AppError('bad_request', 'Request body could not be decoded as its Content-Encoding says');
    }
  };
  parsers.set(limit, parseJson);
  return parseJson;
}

function hasHttpStatus(err: unknown): boolean {
  const e = err as { status?: unknown; statusCode?: unknown } | null;
  return typeof e?.status === 'number' || typeof e?.statusCode === 'number' || err instanceof AppError;
}
