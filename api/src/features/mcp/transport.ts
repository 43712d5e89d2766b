/**
 * What we keep on top of the SDK's Streamable HTTP transport: the Origin
 * check and CORS, reading the body ourselves (the body limit, and routes.ts
 * must see whether it holds a tools/call before the SDK runs anything), and
 * the glue between Koa and the SDK's web-standard Request and Response.
 */
import { ErrorCode } from '@modelcontextprotocol/sdk/types.js';
import type { Context } from 'koa';
import type { AppError, ErrorCode as HouseCode } from '#shared/errors/index.js';

/** The JSON-RPC codes of our own refusals (and of the OpenAPI document). */
export const RPC = {
  PARSE_ERROR: ErrorCode.ParseError,
  INVALID_REQUEST: ErrorCode.InvalidRequest,
  METHOD_NOT_FOUND: ErrorCode.MethodNotFound,
  INVALID_PARAMS: ErrorCode.InvalidParams,
  INTERNAL_ERROR: ErrorCode.InternalError,
  /** Implementation-defined: refusals at the HTTP level (auth, origin, rate limit, version header, Accept, Content-Type). */
  SERVER_ERROR: -32000,
} as const;

interface RpcErrorObject {
  code: number;
  message: string;
  data?: unknown;
}

export type RequestId = string | number;

/**
 * `id` is left out when the request's id could not be read: MCP's schema makes
 * it optional rather than JSON-RPC's `null`.
 */
export function errorResponse(id: RequestId | undefined, error: RpcErrorObject): Record<string, unknown> {
  return id === undefined ? { jsonrpc: '2.0', error } : { jsonrpc: '2.0', id, error };
}

/** Refused at the HTTP level: rendered as `status` with a JSON-RPC error body. */
export class HttpRefusal extends Error {
  constructor(
    readonly status: number,
    readonly rpc: RpcErrorObject,
    readonly headers: Record<string, string> = {},
  ) {
    super(rpc.message);
    this.name = 'HttpRefusal';
  }
}

export const refusal = (status: number, code: string, message: string, rpcCode: number = RPC.SERVER_ERROR, headers: Record<string, string> = {}): HttpRefusal =>
  new HttpRefusal(status, { code: rpcCode, message, data: { code } }, headers);

/** An API error (401, 429, 503 from auth and rate limiting) as a refusal with the same status and headers. */
export function refusalFromAppError(err: AppError): HttpRefusal {
  const data: Record<string, unknown> = { code: err.code };
  if (err.details && err.details.length > 0) data.details = err.details;
  return new HttpRefusal(err.status, { code: RPC.SERVER_ERROR, message: err.message, data }, err.headers);
}

/**
 * DNS-rebinding defence. Non-browser clients send no Origin and are allowed;
 * a browser's Origin must be on MCP_ALLOWED_ORIGINS. The request's own Host is
 * deliberately not trusted as "same origin": a rebinding page's Origin always
 * matches the Host it used.
 */
export function checkOrigin(ctx: Context, allowed: readonly string[]): string | null {
  const origin = ctx.headers.origin;
  if (origin === undefined) return null;
  if (!allowed.includes(origin.toLowerCase())) throw refusal(403, 'forbidden', `Origin ${origin.slice(0, 200)} is not allowed`);
  return origin;
}

const UNITS: Record<string, number> = { b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3 };

/** '1mb' -> 1048576, the notation BODY_LIMIT uses for koa-body; a bad value fails at boot. */
export function byteLimit(value: string): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(b|kb|mb|gb)?\s*$/i.exec(value);
  if (!match) throw new Error(`cannot read "${value}" as a byte size`);
  return Math.floor(Number(match[1]) * (UNITS[(match[2] ?? 'b').toLowerCase()] ?? 1));
}

const tooLarge = (): HttpRefusal => refusal(413, 'payload_too_large', 'Request body is larger than the allowed limit', RPC.SERVER_ERROR, { Connection: 'close' });

const parseError = (message: string): HttpRefusal => refusal(400, 'invalid_json', `Parse error: ${message}`, RPC.PARSE_ERROR);

/** Reads and parses the body (UTF-8 JSON, at most `limit` bytes, not compressed: Koa does not inflate it here). */
export async function readJson(ctx: Context, limit: number): Promise<unknown> {
  const encoding = ctx.get('Content-Encoding');
  if (encoding && encoding.toLowerCase() !== 'identity') {
    throw refusal(415, 'unsupported_media_type', 'Unsupported Media Type: compressed bodies are not accepted');
  }
  const declared = Number(ctx.get('Content-Length'));
  if (Number.isFinite(declared) && declared > limit) throw tooLarge();
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of ctx.req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw tooLarge();
    chunks.push(chunk);
  }
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(Buffer.concat(chunks));
  } catch {
    throw parseError('the body is not valid UTF-8');
  }
  if (text.trim() === '') throw parseError('the body is empty');
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw parseError('the body is not valid JSON');
  }
}

const ALLOW_HEADERS = 'Authorization, Content-Type, Accept, MCP-Protocol-Version, Mcp-Session-Id, Last-Event-ID, X-API-Key, X-Request-Id';

/** CORS for an allowed browser origin (checkOrigin has already refused any other). */
export function setCors(ctx: Context, origin: string | null, preflight: boolean): void {
  ctx.vary('Origin');
  if (origin === null) return;
  ctx.set('Access-Control-Allow-Origin', origin);
  ctx.set('Access-Control-Expose-Headers', 'X-Request-Id, Retry-After, WWW-Authenticate');
  if (preflight) {
    ctx.set('Access-Control-Allow-Methods', 'POST');
    ctx.set('Access-Control-Allow-Headers', ALLOW_HEADERS);
    ctx.set('Access-Control-Max-Age', '600');
  }
}

/**
 * The Request the SDK's transport reads. The body has been read (and is passed parsed), so none is
 * attached. Accept: we answer application/json only (enableJsonResponse), so a client that accepts
 * it (or sends no Accept, or curl's *\/*) can read every answer; the SDK insists on seeing
 * text/event-stream too, so it is shown that. A client that refuses JSON still gets the SDK's 406.
 */
export function webRequest(ctx: Context): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(ctx.req.headers)) {
    if (value === undefined || name === 'content-length' || name === 'transfer-encoding') continue;
    for (const v of Array.isArray(value) ? value : [value]) headers.append(name, v);
  }
  if (ctx.accepts('application/json') !== false) headers.set('Accept', 'application/json, text/event-stream');
  // The SDK reads the URL only to hand it to handlers, which do not use it: no Host header is trusted to build it.
  return new Request(new URL(ctx.originalUrl, 'http://localhost'), { method: ctx.method, headers });
}

/** The API's error code for each refusal status the SDK's transport answers. */
const HOUSE_CODES: Record<number, HouseCode | 'not_acceptable'> = {
  400: 'bad_request',
  404: 'not_found',
  405: 'method_not_allowed',
  406: 'not_acceptable',
  409: 'conflict',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
};

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * An HTTP refusal by the SDK (Accept, Content-Type, version header, malformed message) with the
 * `data` every refusal of this API carries: `{code, request_id}`. Whatever data the SDK put there
 * is dropped: its catch-all puts the text of an internal error in it.
 */
function withHouseData(text: string, status: number, requestId: string): string {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return text;
  }
  if (!isObject(body) || !isObject(body.error)) return text;
  const code = HOUSE_CODES[status] ?? (status >= 500 ? 'internal' : 'bad_request');
  return JSON.stringify({ ...body, error: { ...body.error, data: { code, request_id: requestId } } });
}

/** The SDK's Response as Koa's: status, headers, and the JSON body (none for 202). */
export async function respond(ctx: Context, response: Response): Promise<void> {
  let text = await response.text();
  if (response.status >= 400) text = withHouseData(text, response.status, String(ctx.state.requestId));
  // Body before status: Koa turns a null body into 204 unless the status is set after it (202 stays 202).
  ctx.body = text === '' ? null : text;
  ctx.status = response.status;
  response.headers.forEach((value, name) => ctx.set(name, value));
}
