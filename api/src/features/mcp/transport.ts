/**
 * The HTTP side of MCP's Streamable HTTP transport: the checks a POST passes
 * before any JSON-RPC method runs, and reading the body ourselves so a
 * malformed one gets JSON-RPC's -32700 instead of the API's `invalid_json`.
 */
import type { Context } from 'koa';
import type { AppError } from '../../../../shared/src/errors/index.js';
import { ASSUMED_PROTOCOL_VERSION, isSupportedVersion, PROTOCOL_VERSIONS, type ProtocolVersion, RPC, type RpcErrorObject } from './protocol.js';

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

const refusal = (status: number, code: string, message: string, rpcCode: number = RPC.SERVER_ERROR, headers: Record<string, string> = {}): HttpRefusal =>
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

/** We answer application/json. A client that accepts only other types (e.g. only text/event-stream) gets 406. */
export function checkAccept(ctx: Context): void {
  if (ctx.headers.accept === undefined) return;
  if (!ctx.accepts('application/json')) throw refusal(406, 'not_acceptable', 'Not Acceptable: this server answers with application/json');
}

export function checkContentType(ctx: Context): void {
  if (!ctx.is('application/json', 'application/*+json')) {
    throw refusal(415, 'unsupported_media_type', 'Unsupported Media Type: the body must be application/json');
  }
  const charset = ctx.request.charset;
  if (charset && charset.toLowerCase() !== 'utf-8' && charset.toLowerCase() !== 'utf8') {
    throw refusal(415, 'unsupported_media_type', 'Unsupported Media Type: JSON-RPC messages must be UTF-8');
  }
  const encoding = ctx.get('Content-Encoding');
  if (encoding && encoding.toLowerCase() !== 'identity') {
    throw refusal(415, 'unsupported_media_type', 'Unsupported Media Type: compressed bodies are not accepted');
  }
}

const UNITS: Record<string, number> = { b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3 };

/** '1mb' -> 1048576, the notation BODY_LIMIT uses for koa-body; a bad value fails at boot. */
export function byteLimit(value: string): number {
  const match = /^\s*(\d+(?:\.\d+)?)\s*(b|kb|mb|gb)?\s*$/i.exec(value);
  if (!match) throw new Error(`cannot read "${value}" as a byte size`);
  return Math.floor(Number(match[1]) * (UNITS[(match[2] ?? 'b').toLowerCase()] ?? 1));
}

const tooLarge = (): HttpRefusal => refusal(413, 'payload_too_large', 'Request body is larger than the allowed limit', RPC.SERVER_ERROR, { Connection: 'close' });

export const parseError = (message: string): HttpRefusal => refusal(400, 'invalid_json', `Parse error: ${message}`, RPC.PARSE_ERROR);

/** Reads and parses the body (UTF-8 JSON, at most `limit` bytes). */
export async function readJson(ctx: Context, limit: number): Promise<unknown> {
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

/** MCP-Protocol-Version of a request after initialize; without the header, 2025-03-26 as the transport spec says. */
export function headerVersion(ctx: Context): ProtocolVersion {
  const raw = ctx.headers['mcp-protocol-version'];
  if (raw === undefined) return ASSUMED_PROTOCOL_VERSION;
  const value = Array.isArray(raw) ? raw[0] : raw;
  if (isSupportedVersion(value)) return value;
  throw new HttpRefusal(400, {
    code: RPC.SERVER_ERROR,
    message: `Bad Request: unsupported MCP-Protocol-Version ${String(value).slice(0, 40)}`,
    data: { code: 'bad_request', supported: [...PROTOCOL_VERSIONS], requested: value },
  });
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
