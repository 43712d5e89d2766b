/**
 * `new EventPlatform({ apiKey })`: a typed method for every route of the
 * public API (docs/api.md; the same operations as GET /api/openapi.json,
 * whose operationIds are listed in OPERATIONS below).
 */
import { HttpClient, type ClientOptions } from './http.js';
import { listen, type ListenOptions } from './listen.js';
import type {
  CreatedApiKey,
  CreateWebhookInput,
  DeliveryAttempt,
  DeliverySearchAttempt,
  DeliverySearchPage,
  DeliverySearchParams,
  EventDeliveries,
  EventPage,
  EventRecord,
  EventTypeInfo,
  Health,
  IngestEventInput,
  ListEventsParams,
  LoginInput,
  RecoverResult,
  ReplayResult,
  ResendResult,
  SecretRotation,
  Session,
  SignupInput,
  StreamToken,
  UpdateWebhookInput,
  User,
  WaitParams,
  WaitResult,
  Webhook,
  WebhookStats,
  WebhookWithSecret,
} from './types.js';

const id = (value: string): string => encodeURIComponent(value);

export class AuthApi {
  constructor(private readonly http: HttpClient) {}
  /** `POST /api/auth/signup` (no credential). */
  signup(input: SignupInput): Promise<Session> {
    return this.http.request('POST', '/api/auth/signup', { body: input, anonymous: true });
  }
  /** `POST /api/auth/login` (no credential). */
  login(input: LoginInput): Promise<Session> {
    return this.http.request('POST', '/api/auth/login', { body: input, anonymous: true });
  }
  /** `GET /api/auth/me`. */
  async me(): Promise<User> {
    return (await this.http.request<{ user: User }>('GET', '/api/auth/me')).user;
  }
  /** `POST /api/auth/api-key`: creates or rotates the account's key (the raw key is in this answer only). */
  createApiKey(): Promise<CreatedApiKey> {
    return this.http.request('POST', '/api/auth/api-key');
  }
  /** `DELETE /api/auth/api-key`. */
  async revokeApiKey(): Promise<void> {
    await this.http.request('DELETE', '/api/auth/api-key');
  }
}

export class EventsApi {
  constructor(private readonly http: HttpClient) {}
  /** `GET /api/v1/events`: one page, oldest first, strictly after `since`. */
  list(params: ListEventsParams = {}): Promise<EventPage> {
    return this.http.request('GET', '/api/v1/events', { query: { ...params } });
  }
  /** Every stored event after `since`, page by page (cursor polling); ends at the end of the log. */
  async *all(params: ListEventsParams = {}): AsyncGenerator<EventRecord, void, undefined> {
    let since = params.since;
    for (;;) {
      const page = await this.list({ ...params, since });
      yield* page.events;
      if (page.events.length === 0 || !page.cursor) return;
      since = page.cursor;
    }
  }
  /** `GET /api/v1/events/{id}/deliveries`: the event with each delivery made for it and their attempts. */
  deliveries(eventId: string): Promise<EventDeliveries> {
    return this.http.request('GET', `/api/v1/events/${id(eventId)}/deliveries`);
  }
  /** `POST /api/v1/events/wait`: one long-poll. */
  wait(params: WaitParams = {}, opts: { signal?: AbortSignal } = {}): Promise<WaitResult> {
    const timeout = params.timeout_ms ?? 30_000;
    return this.http.request('POST', '/api/v1/events/wait', { body: params, timeoutMs: timeout + 15_000, idempotent: true, signal: opts.signal });
  }
  /** `POST /api/v1/events/stream-token`: a `svcst_` token for the SSE URL (about 120 s). */
  createStreamToken(): Promise<StreamToken> {
    return this.http.request('POST', '/api/v1/events/stream-token');
  }
  /**
   * The account's events as they come, resuming by itself across disconnects
   * and restarts with no gap and no repeat (SSE, falling back to long-poll):
   * `for await (const event of client.events.listen({ types, since })) …`
   * (`GET /api/v1/events/stream`).
   */
  listen(opts: ListenOptions = {}): AsyncGenerator<EventRecord, void, undefined> {
    return listen(this.http, opts);
  }
}

export class EventTypesApi {
  constructor(private readonly http: HttpClient) {}
  /** `GET /api/v1/event-types`: every event type with its description and the JSON Schema of its `data`. */
  async list(): Promise<EventTypeInfo[]> {
    return (await this.http.request<{ event_types: EventTypeInfo[] }>('GET', '/api/v1/event-types')).event_types;
  }
}

export class WebhooksApi {
  constructor(private readonly http: HttpClient) {}
  /** `GET /api/v1/webhooks`, oldest first. */
  async list(): Promise<Webhook[]> {
    return (await this.http.request<{ webhooks: Webhook[] }>('GET', '/api/v1/webhooks')).webhooks;
  }
  /** `POST /api/v1/webhooks`: the answer carries the signing secret. */
  create(input: CreateWebhookInput): Promise<WebhookWithSecret> {
    return this.http.request('POST', '/api/v1/webhooks', { body: input });
  }
  /** `GET /api/v1/webhooks/{id}`. */
  get(webhookId: string): Promise<Webhook> {
    return this.http.request('GET', `/api/v1/webhooks/${id(webhookId)}`);
  }
  /** `PATCH /api/v1/webhooks/{id}`: url, events, description, enabled. */
  update(webhookId: string, changes: UpdateWebhookInput): Promise<Webhook> {
    return this.http.request('PATCH', `/api/v1/webhooks/${id(webhookId)}`, { body: changes });
  }
  /** `DELETE /api/v1/webhooks/{id}`. */
  async delete(webhookId: string): Promise<void> {
    await this.http.request('DELETE', `/api/v1/webhooks/${id(webhookId)}`);
  }
  /** `POST /api/v1/webhooks/{id}/secret`: shows the signing secret again. */
  async revealSecret(webhookId: string): Promise<string> {
    return (await this.http.request<{ secret: string }>('POST', `/api/v1/webhooks/${id(webhookId)}/secret`)).secret;
  }
  /** `POST /api/v1/webhooks/{id}/secret/rotate`: a new secret; the replaced one also signs for `grace_period_s` (default 24 h). */
  rotateSecret(webhookId: string, params: { grace_period_s?: number } = {}): Promise<SecretRotation> {
    return this.http.request('POST', `/api/v1/webhooks/${id(webhookId)}/secret/rotate`, { body: params });
  }
  /** `GET /api/v1/webhooks/{id}/stats`: attempts per bucket and latency over the last hour (`1h`) or day (`24h`). */
  stats(webhookId: string, params: { window?: '1h' | '24h' } = {}): Promise<WebhookStats> {
    return this.http.request('GET', `/api/v1/webhooks/${id(webhookId)}/stats`, { query: { ...params } });
  }
  /** `POST /api/v1/webhooks/{id}/ping`: a `webhook.ping` event delivered to this subscription only. */
  async ping(webhookId: string): Promise<{ event_id: string }> {
    return this.http.request('POST', `/api/v1/webhooks/${id(webhookId)}/ping`);
  }
  /** `POST /api/v1/webhooks/{id}/deliveries/{delivery_id}/resend`: that delivery again, now, as a new delivery. With an idempotency key a retry queues nothing twice. */
  resend(webhookId: string, deliveryId: string, opts: { idempotencyKey?: string } = {}): Promise<ResendResult> {
    return this.http.request('POST', `/api/v1/webhooks/${id(webhookId)}/deliveries/${id(deliveryId)}/resend`, operation(opts));
  }
  /** `POST /api/v1/webhooks/{id}/recover`: every delivery that failed for good since `since` (ISO time), again; `after_id` continues a truncated call. */
  recover(webhookId: string, params: { since: string; after_id?: string }, opts: { idempotencyKey?: string } = {}): Promise<RecoverResult> {
    return this.http.request('POST', `/api/v1/webhooks/${id(webhookId)}/recover`, { body: params, ...operation(opts) });
  }
  /** `POST /api/v1/webhooks/{id}/replay`: the account's events in (since, until] (polling cursors) to this subscription; continue from `cursor` while `truncated`. */
  replay(webhookId: string, params: { since: string; until?: string }, opts: { idempotencyKey?: string } = {}): Promise<ReplayResult> {
    return this.http.request('POST', `/api/v1/webhooks/${id(webhookId)}/replay`, { body: params, ...operation(opts) });
  }
  /** `GET /api/v1/deliveries`: one page of the attempts of all the account's subscriptions, newest first, filtered. */
  searchDeliveries(params: DeliverySearchParams = {}): Promise<DeliverySearchPage> {
    return this.http.request('GET', '/api/v1/deliveries', { query: { ...params } });
  }
  /** Every attempt matching the filters, newest first, page by page (following `next_cursor` across short pages). */
  async *allDeliveries(params: Omit<DeliverySearchParams, 'cursor'> = {}): AsyncGenerator<DeliverySearchAttempt, void, undefined> {
    let cursor: string | undefined;
    do {
      const page = await this.searchDeliveries({ ...params, cursor });
      yield* page.attempts;
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
  }
  /** `GET /api/v1/webhooks/{id}/deliveries`: recent attempts, newest first. */
  async deliveries(webhookId: string, params: { limit?: number } = {}): Promise<DeliveryAttempt[]> {
    return (await this.http.request<{ attempts: DeliveryAttempt[] }>('GET', `/api/v1/webhooks/${id(webhookId)}/deliveries`, { query: { ...params } })).attempts;
  }
}

/** An operation's idempotency key as its header; with one, a retry after a lost answer is safe. */
function operation(opts: { idempotencyKey?: string }): { headers?: Record<string, string>; idempotent: boolean } {
  return opts.idempotencyKey ? { headers: { 'idempotency-key': opts.idempotencyKey }, idempotent: true } : { idempotent: false };
}

/** The producers' route (`POST /internal/v1/events`): an ingest token, not an account credential. For development and producers. */
export class IngestApi {
  constructor(
    private readonly http: HttpClient,
    private readonly ingestToken: string | undefined,
  ) {}
  async send(events: IngestEventInput[], opts: { idempotencyKey?: string } = {}): Promise<{ id: string; cursor: string }[]> {
    if (!this.ingestToken) throw new TypeError('ingest needs an ingest token (the ingestToken option)');
    const headers: Record<string, string> = { authorization: `Bearer ${this.ingestToken}` };
    if (opts.idempotencyKey) headers['idempotency-key'] = opts.idempotencyKey;
    // With a key a retry cannot duplicate; without one a 503 may have written part of the batch, so no retry then.
    const res = await this.http.request<{ events: { id: string; cursor: string }[] }>('POST', '/internal/v1/events', {
      body: { events },
      headers,
      anonymous: true,
      idempotent: opts.idempotencyKey !== undefined,
    });
    return res.events;
  }
}

export interface EventPlatformOptions extends ClientOptions {
  /** The producers' ingest token (only for `client.ingest`). */
  ingestToken?: string;
}

export class EventPlatform {
  readonly http: HttpClient;
  readonly auth: AuthApi;
  readonly events: EventsApi;
  readonly eventTypes: EventTypesApi;
  readonly webhooks: WebhooksApi;
  readonly ingest: IngestApi;

  constructor(options: EventPlatformOptions = {}) {
    this.http = new HttpClient(options);
    this.auth = new AuthApi(this.http);
    this.events = new EventsApi(this.http);
    this.eventTypes = new EventTypesApi(this.http);
    this.webhooks = new WebhooksApi(this.http);
    this.ingest = new IngestApi(this.http, options.ingestToken);
  }

  /** `GET /healthz`. */
  health(): Promise<Health> {
    return this.http.request('GET', '/healthz', { anonymous: true });
  }
  /** `GET /readyz` (503 -> UnavailableError, after retries). */
  ready(): Promise<Health> {
    return this.http.request('GET', '/readyz', { anonymous: true });
  }
  /** `GET /api/openapi.json`. */
  openapi(): Promise<Record<string, unknown>> {
    return this.http.request('GET', '/api/openapi.json', { anonymous: true });
  }
}

/**
 * Each operationId of the OpenAPI document and the method that calls it
 * (a test checks the document has no operation missing here). Not offered:
 * the MCP endpoint (use an MCP client), metrics (Prometheus text) and the
 * dashboard's pages.
 */
export const OPERATIONS: Readonly<Record<string, string>> = {
  signup: 'auth.signup',
  login: 'auth.login',
  getProfile: 'auth.me',
  createApiKey: 'auth.createApiKey',
  revokeApiKey: 'auth.revokeApiKey',
  listEvents: 'events.list',
  listEventTypes: 'eventTypes.list',
  waitForEvent: 'events.wait',
  createStreamToken: 'events.createStreamToken',
  streamEvents: 'events.listen',
  ingestEvents: 'ingest.send',
  listWebhooks: 'webhooks.list',
  createWebhook: 'webhooks.create',
  getWebhook: 'webhooks.get',
  updateWebhook: 'webhooks.update',
  deleteWebhook: 'webhooks.delete',
  revealWebhookSecret: 'webhooks.revealSecret',
  pingWebhook: 'webhooks.ping',
  listWebhookDeliveries: 'webhooks.deliveries',
  rotateWebhookSecret: 'webhooks.rotateSecret',
  resendWebhookDelivery: 'webhooks.resend',
  recoverWebhookDeliveries: 'webhooks.recover',
  replayWebhookEvents: 'webhooks.replay',
  getWebhookStats: 'webhooks.stats',
  getEventDeliveries: 'events.deliveries',
  searchDeliveries: 'webhooks.searchDeliveries',
  healthz: 'health',
  readyz: 'ready',
  openapi: 'openapi',
};

/** operationIds deliberately without a client method. */
export const NOT_OFFERED: readonly string[] = ['mcp', 'mcpPreflight', 'mcpGet', 'metrics', 'dashboard', 'dashboardSlash', 'dashboardScript', 'dashboardStyles', 'dashboardIcon', 'receiveEvent'];
