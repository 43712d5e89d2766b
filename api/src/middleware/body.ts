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

/**
 * JSON bodies only. A body of another type is refused with 415 rather than
 * silently read as empty. The ingest prefix gets the larger batch limit.
 * `ownParserPaths` are left unread for their routes.
 */
export function jsonBody(opts: { limit: string; ingestLimit: string; ingestPrefix: string; ownParserPaths?: readonly string[] }) {
  const normal = parser(opts.limit);
  const ingest = parser(opts.ingestLimit);
  return async function parseJson(ctx: Context, next: Next): Promise<void> {
    if (!METHODS_WITH_BODY.has(ctx.method)) return next();
    // Routes that must answer a bad body in their own protocol (MCP's JSON-RPC -32700) read it themselves.
    if (opts.ownParserPaths?.includes(ctx.path)) return next();
    const hasBody = Number(ctx.get('Content-Length') || '0') > 0 || ctx.get('Transfer-Encoding') !== '';
    if (hasBody && !ctx.is('application/json', 'application/*+json')) {
      throw new AppError('unsupported_media_type', 'Request body must be application/json');
    }
    const run = ctx.path.startsWith(opts.ingestPrefix) ? ingest : normal;
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
}

function hasHttpStatus(err: unknown): boolean {
  const e = err as { status?: unknown; statusCode?: unknown } | null;
  return typeof e?.status === 'number' || typeof e?.statusCode === 'number' || err instanceof AppError;
}
