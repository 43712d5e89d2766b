/**
 * The request core: credentials, JSON in and out, typed errors, and retries
 * with backoff on 429 and 503 that honour Retry-After. Node's own fetch; no
 * runtime dependency.
 */
import { ConnectionError, errorFromResponse, type ApiError } from './errors.js';

export interface RetryInfo {
  method: string;
  path: string;
  /** 1 for the first retry. */
  attempt: number;
  /** What the client waits before that retry. */
  delayMs: number;
  /** The status that caused it, or null for a connection failure. */
  status: number | null;
  /** The error's code, or the network error's name. */
  reason: string;
}

export interface ClientOptions {
  /** Base URL of the API, e.g. `https://api.example.com` (default `http://localhost:3000`). */
  baseUrl?: string;
  /** A platform API key (`svc_…`). */
  apiKey?: string;
  /** Or a session token (from `auth.login`). */
  token?: string;
  /** Retries of a request answered 429 or 503 (or, when safe, not answered at all). Default 3. */
  maxRetries?: number;
  /** First backoff step when the answer has no Retry-After; doubled each retry, jittered. Default 500 ms. */
  backoffBaseMs?: number;
  /** Longest wait between two tries; a Retry-After beyond it ends the retries. Default 60 s. */
  maxRetryDelayMs?: number;
  /** Per-request timeout (long-polls get their own `timeout_ms` on top). Default 30 s. */
  timeoutMs?: number;
  /** Sent as User-Agent. */
  userAgent?: string;
  /** Called before each retry (logging, tests). */
  onRetry?: (info: RetryInfo) => void;
  /** A fetch to use instead of the global one. */
  fetch?: typeof fetch;
}

export interface RequestOptions {
  query?: Record<string, string | number | undefined | null>;
  body?: unknown;
  headers?: Record<string, string>;
  /** Overrides the client's timeout for this request. */
  timeoutMs?: number;
  signal?: AbortSignal;
  /** Send no credential (signup, login, health). */
  anonymous?: boolean;
  /** Retry even a request that may have been received when the connection failed (the caller knows it is idempotent). */
  idempotent?: boolean;
}

export const DEFAULT_BASE_URL = 'http://localhost:3000';
const VERSION = '0.1.0';

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(done, ms);
    function done(): void {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }
    function onAbort(): void {
      clearTimeout(timer);
      reject(signal?.reason);
    }
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

export { sleep };

/** Full-jitter exponential backoff: a random wait in [base·2^(n-1) / 2, base·2^(n-1)], capped. */
export function backoffDelay(attempt: number, baseMs: number, maxMs: number): number {
  const ceiling = Math.min(maxMs, baseMs * 2 ** (attempt - 1));
  return Math.round(ceiling / 2 + Math.random() * (ceiling / 2));
}

const RETRY_STATUSES = new Set([429, 503]);
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS', 'DELETE', 'PUT']);

export class HttpClient {
  readonly baseUrl: string;
  private readonly credential: string | null;
  private readonly fetchImpl: typeof fetch;

  constructor(readonly options: ClientOptions = {}) {
    this.baseUrl = (options.baseUrl ?? DEFAULT_BASE_URL).replace(/\/+$/, '');
    this.credential = options.apiKey ?? options.token ?? null;
    this.fetchImpl = options.fetch ?? ((input, init) => fetch(input, init));
  }

  url(path: string, query?: RequestOptions['query']): string {
    const url = new URL(path, this.baseUrl + '/');
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined && v !== null) url.searchParams.set(k, String(v));
    return url.toString();
  }

  authHeaders(): Record<string, string> {
    return this.credential ? { authorization: `Bearer ${this.credential}` } : {};
  }

  /** Sends one request (with its retries); resolves to the parsed JSON body (null for an empty one). */
  async request<T>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
    const res = await this.send(method, path, opts);
    const text = await res.text();
    return (text ? JSON.parse(text) : null) as T;
  }

  /** Like `request`, but hands back the Response (body unread) of a 2xx answer. */
  async send(method: string, path: string, opts: RequestOptions = {}): Promise<Response> {
    const maxRetries = this.options.maxRetries ?? 3;
    const baseMs = this.options.backoffBaseMs ?? 500;
    const maxDelay = this.options.maxRetryDelayMs ?? 60_000;
    const headers: Record<string, string> = {
      accept: 'application/json',
      'user-agent': this.options.userAgent ?? `event-platform-client/${VERSION}`,
      ...(opts.anonymous ? {} : this.authHeaders()),
      ...opts.headers,
    };
    let payload: string | undefined;
    if (opts.body !== undefined) {
      payload = JSON.stringify(opts.body);
      headers['content-type'] = 'application/json';
    }
    const url = this.url(path, opts.query);
    for (let attempt = 1; ; attempt++) {
      const signals = [AbortSignal.timeout(opts.timeoutMs ?? this.options.timeoutMs ?? 30_000)];
      if (opts.signal) signals.push(opts.signal);
      let res: Response;
      try {
        res = await this.fetchImpl(url, { method, headers, body: payload, signal: AbortSignal.any(signals) });
      } catch (err) {
        if (opts.signal?.aborted) throw opts.signal.reason;
        const failure = new ConnectionError(`${method} ${path}: ${describe(err)}`, err);
        // Retry only when the request certainly did not run twice, or running it twice is harmless.
        const retriable = SAFE_METHODS.has(method) || opts.idempotent === true || refused(err);
        if (!retriable || attempt > maxRetries) throw failure;
        const delayMs = backoffDelay(attempt, baseMs, maxDelay);
        this.options.onRetry?.({ method, path, attempt, delayMs, status: null, reason: errorCode(err) });
        await sleep(delayMs, opts.signal);
        continue;
      }
      if (res.ok) return res;
      const error: ApiError = errorFromResponse(res.status, res.headers, await res.text().catch(() => ''));
      if (!RETRY_STATUSES.has(res.status) || attempt > maxRetries) throw error;
      let delayMs: number;
      if (error.retryAfter !== null) {
        delayMs = error.retryAfter * 1000;
        if (delayMs > maxDelay) throw error; // honour it: never come back sooner than asked
      } else {
        delayMs = backoffDelay(attempt, baseMs, maxDelay);
      }
      this.options.onRetry?.({ method, path, attempt, delayMs, status: res.status, reason: error.code });
      await sleep(delayMs, opts.signal);
    }
  }
}

function errorCode(err: unknown): string {
  const cause = (err as { cause?: { code?: unknown } }).cause;
  if (cause && typeof cause.code === 'string') return cause.code;
  return err instanceof Error ? err.name : 'network';
}

/** A refused connection: nothing reached the server, so any request may be retried. */
function refused(err: unknown): boolean {
  return errorCode(err) === 'ECONNREFUSED';
}

function describe(err: unknown): string {
  const code = errorCode(err);
  const message = err instanceof Error ? err.message : String(err);
  return code && !message.includes(code) ? `${message} (${code})` : message;
}
