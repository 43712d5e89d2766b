/**
 * Every non-2xx answer becomes an `ApiError` (or the subclass for its status)
 * carrying the server's error `code`, `message`, `request_id` and `details`.
 * A request that got no answer at all (refused connection, reset, timeout)
 * is a `ConnectionError`.
 */

/** The error codes the server sends (shared/src/errors/index.ts). */
export type ErrorCode =
  | 'bad_request'
  | 'invalid_json'
  | 'validation_failed'
  | 'unauthorized'
  | 'forbidden'
  | 'not_found'
  | 'method_not_allowed'
  | 'request_timeout'
  | 'conflict'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'headers_too_large'
  | 'rate_limited'
  | 'too_many_streams'
  | 'internal'
  | 'unavailable';

export interface ErrorDetail {
  path: string;
  message: string;
}

export class EventPlatformError extends Error {
  override name = 'EventPlatformError';
}

export class ApiError extends EventPlatformError {
  override name = 'ApiError';
  constructor(
    readonly status: number,
    /** The server's code; `unknown` when the body was not the JSON error shape (a proxy's page). */
    readonly code: ErrorCode | 'unknown',
    message: string,
    readonly requestId: string | null = null,
    readonly details: ErrorDetail[] = [],
    /** Seconds from the Retry-After header, when one came. */
    readonly retryAfter: number | null = null,
  ) {
    super(message);
  }
}

/** 400: `bad_request`, `invalid_json`, `validation_failed` (see `details`). */
export class ValidationError extends ApiError {
  override name = 'ValidationError';
}
/** 401: missing, bad, expired or revoked credential. */
export class AuthenticationError extends ApiError {
  override name = 'AuthenticationError';
}
/** 403. */
export class PermissionError extends ApiError {
  override name = 'PermissionError';
}
/** 404: unknown id, or another account's. */
export class NotFoundError extends ApiError {
  override name = 'NotFoundError';
}
/** 409: the account's state refuses it (subscription cap, idempotency key in use). */
export class ConflictError extends ApiError {
  override name = 'ConflictError';
}
/** 429 `rate_limited` / `too_many_streams`, after the client's own retries ran out. */
export class RateLimitError extends ApiError {
  override name = 'RateLimitError';
}
/** 503 `unavailable` (Kafka, MongoDB or DNS down), after the client's own retries ran out. */
export class UnavailableError extends ApiError {
  override name = 'UnavailableError';
}
/** Any other 5xx. */
export class ServerError extends ApiError {
  override name = 'ServerError';
}

/** No HTTP answer: connection refused or reset, DNS failure, or the client's timeout. */
export class ConnectionError extends EventPlatformError {
  override name = 'ConnectionError';
  constructor(
    message: string,
    override readonly cause?: unknown,
  ) {
    super(message);
  }
}

type ApiErrorClass = new (...args: ConstructorParameters<typeof ApiError>) => ApiError;

const BY_STATUS: Record<number, ApiErrorClass> = {
  400: ValidationError,
  401: AuthenticationError,
  403: PermissionError,
  404: NotFoundError,
  409: ConflictError,
  429: RateLimitError,
  503: UnavailableError,
};

/** Seconds to wait from a Retry-After header (delta-seconds or an HTTP date); null if absent or unreadable. */
export function parseRetryAfter(value: string | null, now = Date.now()): number | null {
  if (value === null || value.trim() === '') return null;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed);
  const date = Date.parse(trimmed);
  if (Number.isNaN(date)) return null;
  return Math.max(0, Math.ceil((date - now) / 1000));
}

/** Builds the typed error of a non-2xx response from its status, headers and body text. */
export function errorFromResponse(status: number, headers: Headers, text: string): ApiError {
  let code: ErrorCode | 'unknown' = 'unknown';
  let message = `HTTP ${status}`;
  let requestId: string | null = headers.get('x-request-id');
  let details: ErrorDetail[] = [];
  try {
    const body = JSON.parse(text) as { error?: { code?: unknown; message?: unknown; request_id?: unknown; details?: unknown } };
    const e = body.error;
    if (e && typeof e.code === 'string') {
      code = e.code as ErrorCode;
      if (typeof e.message === 'string') message = e.message;
      if (typeof e.request_id === 'string') requestId = e.request_id;
      if (Array.isArray(e.details)) details = e.details as ErrorDetail[];
    }
  } catch {
    if (text) message = `HTTP ${status}: ${text.slice(0, 200)}`;
  }
  const Cls = BY_STATUS[status] ?? (status >= 500 ? ServerError : ApiError);
  return new Cls(status, code, message, requestId, details, parseRetryAfter(headers.get('retry-after')));
}
