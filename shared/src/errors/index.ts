/**
 * One error model for the whole service: throw an AppError with a code from
 * the table below; the Koa middleware renders it. Anything else is a bug and
 * becomes a logged 500 that exposes nothing.
 */
export const ERROR_STATUS = {
  bad_request: 400,
  invalid_json: 400,
  validation_failed: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  request_timeout: 408,
  conflict: 409,
  cursor_expired: 410,
  payload_too_large: 413,
  unsupported_media_type: 415,
  headers_too_large: 431,
  rate_limited: 429,
  too_many_streams: 429,
  internal: 500,
  not_implemented: 501,
  unavailable: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export interface ErrorDetail {
  path: string;
  message: string;
}

export class AppError extends Error {
  readonly status: number;
  /** The oldest cursor still available (cursor_expired only). */
  oldestCursor?: string;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: ErrorDetail[],
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'AppError';
    this.status = ERROR_STATUS[code];
  }
}

export const notFound = (what: string): AppError => new AppError('not_found', `${what} not found`);

export const unavailable = (what: string, retryAfterSeconds = 5): AppError =>
  new AppError('unavailable', `${what} is unavailable, try again shortly`, undefined, {
    'Retry-After': String(retryAfterSeconds),
  });

export const unauthorized = (message = 'Missing or invalid credentials'): AppError =>
  new AppError('unauthorized', message, undefined, { 'WWW-Authenticate': 'Bearer' });

/** A cursor below the retention: its events are deleted; `oldest` is where history now starts. */
export function cursorExpired(field: string, oldest: string): AppError {
  const err = new AppError('cursor_expired', `${field} points before the oldest event still kept (history is kept EVENT_RETENTION_DAYS); continue from oldest_cursor`, [{ path: field, message: 'is older than the retention' }]);
  err.oldestCursor = oldest;
  return err;
}

export function validationFailed(details: ErrorDetail[], message = 'Request validation failed'): AppError {
  return new AppError('validation_failed', message, details);
}

interface ErrorBody {
  error: { code: string; message: string; request_id: string; details?: ErrorDetail[]; oldest_cursor?: string };
}

export function errorBody(err: AppError, requestId: string): ErrorBody {
  const body: ErrorBody = { error: { code: err.code, message: err.message, request_id: requestId } };
  if (err.details && err.details.length > 0) body.error.details = err.details;
  if (err.oldestCursor !== undefined) body.error.oldest_cursor = err.oldestCursor;
  return body;
}
