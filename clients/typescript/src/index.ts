export { EventPlatform, AuthApi, EventsApi, EventTypesApi, WebhooksApi, IngestApi, OPERATIONS, NOT_OFFERED, type EventPlatformOptions } from './client.js';
export { HttpClient, DEFAULT_BASE_URL, type ClientOptions, type RequestOptions, type RetryInfo } from './http.js';
export { SseParser, type ListenOptions, type ReconnectInfo, type Transport } from './listen.js';
export {
  ApiError,
  AuthenticationError,
  ConflictError,
  ConnectionError,
  EventPlatformError,
  NotFoundError,
  PermissionError,
  RateLimitError,
  ServerError,
  UnavailableError,
  ValidationError,
  parseRetryAfter,
  type ErrorCode,
  type ErrorDetail,
} from './errors.js';
export { verifyWebhook, signDelivery, signStandard, signService, WebhookVerificationError, type HeaderBag, type VerifyOptions, type VerificationFailure } from './verify.js';
export * from './types.js';
