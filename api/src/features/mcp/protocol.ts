/**
 * JSON-RPC 2.0 as MCP uses it: message shapes, error codes, and protocol
 * version negotiation. Pure functions, no I/O: the HTTP transport lives in
 * routes.ts and method handling in dispatch.ts.
 */

/** Newest first. `initialize` echoes the client's version when it is listed here. */
export const PROTOCOL_VERSIONS = ['2025-11-25', '2025-06-18', '2025-03-26'] as const;
export type ProtocolVersion = (typeof PROTOCOL_VERSIONS)[number];
export const LATEST_PROTOCOL_VERSION: ProtocolVersion = '2025-11-25';
/** Streamable HTTP: a request without MCP-Protocol-Version is treated as this version. */
export const ASSUMED_PROTOCOL_VERSION: ProtocolVersion = '2025-03-26';

export function isSupportedVersion(value: unknown): value is ProtocolVersion {
  return typeof value === 'string' && (PROTOCOL_VERSIONS as readonly string[]).includes(value);
}

/** The client's version when we speak it, else our latest (the client then decides whether to go on). */
export function negotiateVersion(requested: string): ProtocolVersion {
  return isSupportedVersion(requested) ? requested : LATEST_PROTOCOL_VERSION;
}

/** Is `version` at least `since`? Version strings are dates, so they compare as strings. */
export function versionAtLeast(version: ProtocolVersion, since: ProtocolVersion): boolean {
  return version >= since;
}

export const RPC = {
  PARSE_ERROR: -32700,
  INVALID_REQUEST: -32600,
  METHOD_NOT_FOUND: -32601,
  INVALID_PARAMS: -32602,
  INTERNAL_ERROR: -32603,
  /** Implementation-defined: refusals at the HTTP level (auth, origin, rate limit, version header). */
  SERVER_ERROR: -32000,
} as const;

export type RequestId = string | number;
export type Params = Record<string, unknown>;

export interface RpcErrorObject {
  code: number;
  message: string;
  data?: unknown;
}

/** Thrown by method handlers; becomes a JSON-RPC error response for that request. */
export class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
    this.name = 'RpcError';
  }

  toJSON(): RpcErrorObject {
    return this.data === undefined ? { code: this.code, message: this.message } : { code: this.code, message: this.message, data: this.data };
  }
}

export const invalidParams = (message: string, data?: unknown): RpcError => new RpcError(RPC.INVALID_PARAMS, message, data);

export interface ResultResponse {
  jsonrpc: '2.0';
  id: RequestId;
  result: Record<string, unknown>;
}

/**
 * `id` is left out when the request's id could not be read (parse error,
 * invalid request): MCP's schema makes it optional rather than JSON-RPC's
 * `null`, and MCP clients reject a null id.
 */
export interface ErrorResponse {
  jsonrpc: '2.0';
  id?: RequestId;
  error: RpcErrorObject;
}

export type Response = ResultResponse | ErrorResponse;

export const resultResponse = (id: RequestId, result: Record<string, unknown>): ResultResponse => ({ jsonrpc: '2.0', id, result });

export function errorResponse(id: RequestId | undefined, error: RpcErrorObject): ErrorResponse {
  return id === undefined ? { jsonrpc: '2.0', error } : { jsonrpc: '2.0', id, error };
}

/** One incoming message, sorted by what it asks of us. */
export type Message =
  | { kind: 'request'; id: RequestId; method: string; params: unknown }
  | { kind: 'notification'; method: string; params: unknown }
  /** A response to a server-to-client request. We send none, so these are accepted and dropped. */
  | { kind: 'response' }
  | { kind: 'invalid'; id?: RequestId; reason: string };

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** MCP ids are strings or integers; JSON-RPC's null id is not allowed for requests. */
const isRequestId = (v: unknown): v is RequestId => typeof v === 'string' || (typeof v === 'number' && Number.isInteger(v));

export function classify(raw: unknown): Message {
  if (!isObject(raw)) return { kind: 'invalid', reason: 'A JSON-RPC message must be an object' };
  const id = isRequestId(raw.id) ? raw.id : undefined;
  if (raw.jsonrpc !== '2.0') return { kind: 'invalid', id, reason: 'jsonrpc must be "2.0"' };
  if ('method' in raw) {
    if (typeof raw.method !== 'string' || raw.method === '') return { kind: 'invalid', id, reason: 'method must be a non-empty string' };
    // JSON-RPC allows structured params only; MCP always uses an object (checked per method).
    if (raw.params !== undefined && (raw.params === null || typeof raw.params !== 'object')) return { kind: 'invalid', id, reason: 'params must be an object' };
    if (!('id' in raw)) return { kind: 'notification', method: raw.method, params: raw.params };
    if (id === undefined) return { kind: 'invalid', reason: 'id must be a string or an integer' };
    return { kind: 'request', id, method: raw.method, params: raw.params };
  }
  if (id !== undefined && ('result' in raw || isObject(raw.error))) return { kind: 'response' };
  return { kind: 'invalid', id, reason: 'Not a JSON-RPC request, notification or response' };
}

/** A method's params as an object; absent params count as `{}`. */
export function paramsObject(params: unknown): Params {
  if (params === undefined) return {};
  if (!isObject(params)) throw invalidParams('params must be an object');
  return params;
}
