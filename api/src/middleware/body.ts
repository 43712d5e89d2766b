import type { Context, Next } from 'koa';
import { koaBody } from 'koa-body';
import { AppError } from '#shared/errors/index.js';

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

/** `application/json` or `application/<x>+json`, with no charset or UTF-8: the types the fast path reads itself. */
const PLAIN_JSON_TYPE = /^application\/(?:[a-z0-9.+-]*\+)?json[ \t]*(?:;[ \t]*charset[ \t]*=[ \t]*(?:utf-8|"utf-8")[ \t]*)?$/i;
/** co-body's strict mode: an object or an array (RFC 7159 whitespace first). */
const STRICT_JSON = /^[ \t\n\r]*(\[|\{)/;
/** @hapi/bourne's test for a `"__proto__":` key, escaped or not (what koa-body refuses). */
const SUSPECT_PROTO = /"(?:_|\\u005[Ff])(?:_|\\u005[Ff])(?:p|\\u0070)(?:r|\\u0072)(?:o|\\u006[Ff])(?:t|\\u0074)(?:o|\\u006[Ff])(?:_|\\u005[Ff])(?:_|\\u005[Ff])"\s*:/;

/** `1mb`, `16mb`, `512kb`, `100` (bytes): the `bytes` package's units (powers of 1024). */
export function parseLimit(limit: string): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(b|kb|mb|gb)?\s*$/i.exec(limit);
  if (!match) throw new Error(`body limit "${limit}" is not a size`);
  const unit = { b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3 }[(match[2] ?? 'b').toLowerCase() as 'b' | 'kb' | 'mb' | 'gb'];
  return Math.floor(Number(match[1]) * unit);
}

/**
 * The common case read without koa-body: a UTF-8 JSON body with a
 * Content-Length and no Content-Encoding. Answers exactly as koa-body does
 * (413 over the limit, invalid_json for a bad or non-object/array body, 400
 * for a `__proto__` key, a leading BOM dropped); anything else (chunked,
 * compressed, another charset) goes through koa-body.
 */
function fastPathLength(ctx: Context): number | null {
  const headers = ctx.req.headers;
  const encoding = headers['content-encoding'];
  if (encoding !== undefined && encoding.trim().toLowerCase() !== 'identity') return null;
  if (headers['transfer-encoding'] !== undefined) return null;
  const type = headers['content-type'];
  const length = headers['content-length'];
  if (type === undefined || length === undefined || !PLAIN_JSON_TYPE.test(type) || !/^\d{1,15}$/.test(length)) return null;
  const n = Number(length);
  return n > 0 ? n : null;
}

function readExactly(ctx: Context, length: number, limit: number): Promise<Buffer> {
  const req = ctx.req;
  if (length > limit) {
    req.pause();
    return Promise.reject(new AppError('payload_too_large', 'Request body is larger than the allowed limit'));
  }
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    const cleanup = (): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
    };
    const onData = (chunk: Buffer): void => {
      received += chunk.length;
      if (received > length) {
        cleanup();
        req.pause();
        reject(new AppError('bad_request', 'request size did not match content length'));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      cleanup();
      if (received !== length) reject(new AppError('bad_request', 'request size did not match content length'));
      else resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, received));
    };
    const onError = (err: Error): void => {
      cleanup();
      reject(Object.assign(err, { status: 400 }));
    };
    const onClose = (): void => {
      cleanup();
      reject(new AppError('bad_request', 'request aborted'));
    };
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}

function parseStrictJson(buf: Buffer): unknown {
  let text = buf.toString('utf8');
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  if (!STRICT_JSON.test(text)) throw new AppError('invalid_json', 'Request body is not valid JSON');
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new AppError('invalid_json', 'Request body is not valid JSON');
  }
  if (SUSPECT_PROTO.test(text) && hasProtoKey(parsed)) throw new AppError('bad_request', 'Bad request');
  return parsed;
}

/** An own `__proto__` key anywhere (JSON.parse makes one; a later merge would set a prototype). */
function hasProtoKey(root: unknown): boolean {
  const stack: unknown[] = [root];
  while (stack.length > 0) {
    const node = stack.pop();
    if (node === null || typeof node !== 'object') continue;
    if (Object.prototype.hasOwnProperty.call(node, '__proto__')) return true;
    for (const value of Object.values(node)) if (value !== null && typeof value === 'object') stack.push(value);
  }
  return false;
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
  const maxBytes = parseLimit(limit);
  const parseJson = async (ctx: Context, next: Next): Promise<void> => {
    if (!METHODS_WITH_BODY.has(ctx.method)) return next();
    const length = fastPathLength(ctx);
    if (length !== null) {
      ctx.request.body = parseStrictJson(await readExactly(ctx, length, maxBytes)) as typeof ctx.request.body;
      return next();
    }
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
