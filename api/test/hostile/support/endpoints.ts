/**
 * The table of every HTTP endpoint the API serves, with how it authenticates
 * and a generator of valid requests. The hostile tests iterate it, and
 * `routes.test.ts` fails when the app serves a route this table lacks, so a
 * new endpoint cannot ship unfuzzed.
 */
import fc from 'fast-check';
import { EVENT_TYPES, PRODUCER_EVENT_TYPES } from '#shared/eventlog/types.js';
import { hostileJson } from './arbitraries.js';
import { bearer, type TestAccount } from '../../support/accounts.js';

export type AuthKind =
  /** No credential. */
  | 'none'
  /** Session token or API key (Authorization: Bearer, or X-API-Key). */
  | 'account'
  /** The producer ingest token. */
  | 'ingest'
  /** A stream token in the `token` query parameter. */
  | 'stream_token'
  /** MCP: discovery is open; tools/call takes the API key as Bearer. */
  | 'mcp';

/** What one account owns that endpoints refer to. */
export interface Fixture {
  account: TestAccount;
  /** A cursor of the account's own events. */
  cursor?: string;
  /** The id of a resource the account owns, for routes with `:id`. */
  id?: string;
  streamToken?: string;
}

export interface Endpoint {
  /** ALL: a route that answers every other method (with 405). */
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE' | 'OPTIONS' | 'ALL';
  /** As the router declares it, e.g. `/api/v1/webhooks/:id`. */
  route: string;
  auth: AuthKind;
  /** Valid JSON bodies; absent for endpoints that take no body. */
  body?: (f: Fixture) => fc.Arbitrary<Record<string, unknown>>;
  /** Fields the body schema knows (mutations replace these). */
  bodyFields?: string[];
  /** Query parameters the endpoint knows, with valid values. */
  query?: (f: Fixture) => fc.Arbitrary<Record<string, string>>;
  queryNames?: string[];
  /** Where the endpoint takes a cursor, for the cursor fuzz and the cross-account matrix. */
  cursorIn?: 'query' | 'body';
  /** A successful call changes the credential (API-key rotation): fuzz it with the session token. */
  changesCredential?: boolean;
  /** Holds the request open (long-poll, stream): fuzz with a short client timeout. */
  holdsOpen?: boolean;
  /** Not JSON on success (static files, redirects). */
  nonJson?: boolean;
  /** Errors are JSON-RPC error objects rather than the house shape. */
  jsonRpc?: boolean;
  /** Largest body accepted (413 above it); 1 MB unless said. */
  bodyLimitBytes?: number;
  /** Fuzz cases for this endpoint (each is one HTTP request). */
  runs: number;
}

export const endpointName = (ep: Endpoint): string => `${ep.method} ${ep.route}`;

const uniqueEmail = fc.uuid().map((u) => `fz-${u}@example.com`);
const displayName = fc.string({ unit: 'grapheme', minLength: 1, maxLength: 60 }).filter((s) => s.trim().length > 0);
const password = fc.string({ unit: 'grapheme', minLength: 8, maxLength: 40 });

const ACCOUNTS: Endpoint[] = [
  {
    method: 'POST',
    route: '/api/auth/signup',
    auth: 'none',
    body: () =>
      fc.record(
        {
          email: uniqueEmail,
          name: displayName,
          password,
          phone: fc.constantFrom('+44 20 7946 0018', '555-0100', '(555) 010.0100', ''),
          plan: fc.constantFrom('free', 'pro', 'énterprise ☁', ''),
        },
        { requiredKeys: ['email', 'name', 'password'] },
      ),
    bodyFields: ['email', 'name', 'password', 'phone', 'plan'],
    runs: 120,
  },
  {
    method: 'POST',
    route: '/api/auth/login',
    auth: 'none',
    body: (f) => fc.record({ email: fc.oneof(fc.constant(f.account.email), uniqueEmail), password: fc.oneof(fc.constant(f.account.password), password) }),
    bodyFields: ['email', 'password', 'name', 'phone', 'plan'],
    runs: 80,
  },
  { method: 'GET', route: '/api/auth/me', auth: 'account', runs: 100 },
  { method: 'POST', route: '/api/auth/api-key', auth: 'account', changesCredential: true, runs: 60 },
  { method: 'DELETE', route: '/api/auth/api-key', auth: 'account', changesCredential: true, runs: 40 },
];

const OPERATIONS: Endpoint[] = [
  { method: 'GET', route: '/healthz', auth: 'none', runs: 30 },
  { method: 'GET', route: '/readyz', auth: 'none', runs: 30 },
  { method: 'GET', route: '/api/openapi.json', auth: 'none', runs: 10 },
  { method: 'GET', route: '/metrics', auth: 'none', nonJson: true, runs: 10 },
  { method: 'GET', route: '/dashboard', auth: 'none', nonJson: true, runs: 20 },
  { method: 'GET', route: '/dashboard/', auth: 'none', nonJson: true, runs: 10 },
  { method: 'GET', route: '/dashboard/app.js', auth: 'none', nonJson: true, runs: 10 },
  { method: 'GET', route: '/dashboard/app.css', auth: 'none', nonJson: true, runs: 10 },
  { method: 'GET', route: '/dashboard/favicon.svg', auth: 'none', nonJson: true, runs: 10 },
];

const eventType = fc.constantFrom(...EVENT_TYPES);
const ownCursor = (f: Fixture): fc.Arbitrary<string> => fc.constant(f.cursor ?? 'c1_MC4w');
const eventData = fc.dictionary(fc.string({ unit: 'grapheme', minLength: 1, maxLength: 12 }).filter((k) => !k.startsWith('$') && !k.includes('.')), fc.oneof(fc.string({ maxLength: 40 }), fc.integer(), fc.boolean()), { maxKeys: 4 });
/** What a producer may send (the service writes the operational types itself; ingest refuses them). */
const producerType = fc.constantFrom(...PRODUCER_EVENT_TYPES);
const ingestEvent = (f: Fixture) =>
  fc.record({ account_id: fc.constant(f.account.userId), type: producerType, data: eventData, occurred_at: fc.date({ min: new Date('2000-01-01'), max: new Date('2100-01-01'), noInvalidDate: true }).map((d) => d.toISOString()) }, { requiredKeys: ['account_id', 'type', 'data'] });

const EVENTS: Endpoint[] = [
  {
    method: 'GET',
    route: '/api/v1/events',
    auth: 'account',
    query: (f) => fc.record({ type: eventType, since: ownCursor(f), limit: fc.integer({ min: 1, max: 500 }).map(String) }, { requiredKeys: [] }),
    queryNames: ['type', 'since', 'limit'],
    cursorIn: 'query',
    runs: 200,
  },
  {
    method: 'POST',
    route: '/api/v1/events/wait',
    auth: 'account',
    // Short waits only: a valid case holds the request open for timeout_ms.
    body: (f) => fc.record({ types: fc.uniqueArray(eventType, { maxLength: 3 }), timeout_ms: fc.integer({ min: 0, max: 50 }), since: ownCursor(f) }, { requiredKeys: ['timeout_ms'] }),
    bodyFields: ['types', 'timeout_ms', 'since'],
    cursorIn: 'body',
    holdsOpen: true,
    runs: 100,
  },
  { method: 'POST', route: '/api/v1/events/stream-token', auth: 'account', runs: 60 },
  { method: 'GET', route: '/api/v1/event-types', auth: 'account', runs: 30 },
  {
    method: 'GET',
    route: '/api/v1/events/stream',
    auth: 'stream_token',
    query: (f) => fc.record({ types: fc.uniqueArray(eventType, { maxLength: 3 }).map((t) => t.join(',')), since: ownCursor(f) }, { requiredKeys: [] }),
    queryNames: ['token', 'types', 'since'],
    cursorIn: 'query',
    holdsOpen: true,
    runs: 60,
  },
  {
    method: 'POST',
    route: '/internal/v1/events',
    auth: 'ingest',
    body: (f) => fc.oneof(ingestEvent(f), fc.record({ events: fc.array(ingestEvent(f), { minLength: 1, maxLength: 5 }) })) as fc.Arbitrary<Record<string, unknown>>,
    bodyFields: ['account_id', 'type', 'data', 'occurred_at', 'events'],
    bodyLimitBytes: 16 * 1024 * 1024,
    runs: 200,
  },
];

/** Public addresses as literals: creating a subscription needs no DNS. */
const publicUrl = fc.tuple(fc.constantFrom('93.184.216.34', '1.1.1.1', '[2606:4700:4700::1111]'), fc.webPath()).map(([host, path]) => `https://${host}${path}`);
const webhookEvents = fc.oneof(fc.constant(['*']), fc.uniqueArray(eventType, { minLength: 1, maxLength: 4 }));

const WEBHOOKS: Endpoint[] = [
  { method: 'GET', route: '/api/v1/webhooks', auth: 'account', runs: 60 },
  {
    method: 'POST',
    route: '/api/v1/webhooks',
    auth: 'account',
    body: () => fc.record({ url: publicUrl, events: webhookEvents, description: fc.string({ unit: 'grapheme', maxLength: 80 }) }, { requiredKeys: ['url', 'events'] }),
    bodyFields: ['url', 'events', 'description'],
    // Fewer than the other bodies: each accepted create answers after the 1 s subscription fence
    // (shared/src/subscription-fence.ts). `npm run test:hostile` (FUZZ_SCALE=3) runs three times as many.
    runs: 60,
  },
  { method: 'GET', route: '/api/v1/webhooks/:id', auth: 'account', runs: 60 },
  {
    method: 'PATCH',
    route: '/api/v1/webhooks/:id',
    auth: 'account',
    body: () =>
      fc.record({ url: publicUrl, events: webhookEvents, description: fc.string({ unit: 'grapheme', maxLength: 80 }), enabled: fc.boolean() }, { requiredKeys: [] }).filter((b) => Object.keys(b).length > 0),
    bodyFields: ['url', 'events', 'description', 'enabled'],
    runs: 50, // an accepted PATCH of url, events or enabled answers after the 1 s fence
  },
  { method: 'DELETE', route: '/api/v1/webhooks/:id', auth: 'account', runs: 40 },
  { method: 'POST', route: '/api/v1/webhooks/:id/secret', auth: 'account', runs: 60 },
  {
    method: 'POST',
    route: '/api/v1/webhooks/:id/secret/rotate',
    auth: 'account',
    body: () => fc.record({ grace_period_s: fc.integer({ min: 0, max: 604_800 }) }, { requiredKeys: [] }),
    bodyFields: ['grace_period_s'],
    runs: 60,
  },
  { method: 'POST', route: '/api/v1/webhooks/:id/ping', auth: 'account', runs: 60 },
  {
    method: 'GET',
    route: '/api/v1/webhooks/:id/deliveries',
    auth: 'account',
    query: () => fc.record({ limit: fc.integer({ min: 1, max: 200 }).map(String) }, { requiredKeys: [] }),
    queryNames: ['limit'],
    runs: 60,
  },
  {
    method: 'GET',
    route: '/api/v1/webhooks/:id/stats',
    auth: 'account',
    query: () => fc.record({ window: fc.constantFrom('1h', '24h') }, { requiredKeys: [] }),
    queryNames: ['window'],
    runs: 60,
  },
  // Resend, recover, replay (api/test/webhooks-resend.test.ts covers them end to end). `:delivery_id` stays
  // as written (a malformed id: 404), so the fuzz never queues a real delivery again.
  { method: 'POST', route: '/api/v1/webhooks/:id/deliveries/:delivery_id/resend', auth: 'account', runs: 40 },
  {
    method: 'POST',
    route: '/api/v1/webhooks/:id/recover',
    auth: 'account',
    body: () => fc.record({ since: fc.integer({ min: 0, max: 29 * 86_400_000 }).map((ago) => new Date(Date.now() - ago).toISOString()) }),
    bodyFields: ['since'],
    runs: 60,
  },
  {
    method: 'POST',
    route: '/api/v1/webhooks/:id/replay',
    auth: 'account',
    body: (f) => fc.record({ since: fc.constant(f.cursor ?? 'c1_MC4w'), until: ownCursor(f) }, { requiredKeys: ['since'] }),
    bodyFields: ['since', 'until'],
    runs: 60,
  },
  // `:id` is filled with a subscription id: for this route that is an id that cannot be an event's (404); the activity tests cover real ones.
  { method: 'GET', route: '/api/v1/events/:id/deliveries', auth: 'account', runs: 40 },
  {
    method: 'GET',
    route: '/api/v1/deliveries',
    auth: 'account',
    query: () =>
      fc.record(
        {
          outcome: fc.constantFrom('ok', 'failed', 'timeout', 'http_5xx,connect'),
          status: fc.constantFrom('404', '5xx', '400-429'),
          event_type: eventType,
          from: fc.integer({ min: 1, max: 29 * 86_400_000 }).map((ago) => new Date(Date.now() - ago).toISOString()),
          limit: fc.integer({ min: 1, max: 200 }).map(String),
        },
        { requiredKeys: [] },
      ),
    queryNames: ['outcome', 'status', 'event_type', 'webhook_id', 'from', 'to', 'limit', 'cursor'],
    runs: 60,
  },
];

/** Tool arguments: names the tools know, with values of any shape (short waits when valid). */
const toolArguments = fc.dictionary(fc.constantFrom('since', 'types', 'timeout_ms', 'limit', 'type', 'url', 'events', 'description', 'enabled', 'grace_period_s', 'id', 'delivery_id', 'until', 'idempotency_key', 'extra'), fc.oneof(hostileJson(2), fc.integer({ min: 0, max: 50 })), { maxKeys: 4 });
const rpcId = fc.oneof(fc.integer(), fc.string({ maxLength: 20 }));
const rpcMessage = fc.oneof(
  fc.record({ jsonrpc: fc.constant('2.0'), id: rpcId, method: fc.constant('initialize'), params: fc.record({ protocolVersion: fc.constantFrom('2025-11-25', '2025-06-18', '2025-03-26', '1999-01-01'), capabilities: fc.constant({}), clientInfo: fc.record({ name: fc.string(), version: fc.string() }) }) }),
  fc.record({ jsonrpc: fc.constant('2.0'), id: rpcId, method: fc.constantFrom('ping', 'tools/list') }),
  fc.record({ jsonrpc: fc.constant('2.0'), id: rpcId, method: fc.constant('tools/call'), params: fc.record({ name: fc.constantFrom('whoami', 'list_events', 'wait_for_event', 'list_webhooks', 'create_webhook', 'update_webhook', 'get_webhook', 'delete_webhook', 'no_such_tool'), arguments: toolArguments }) }),
  fc.record({ jsonrpc: fc.constant('2.0'), method: fc.constantFrom('notifications/initialized', 'notifications/cancelled') }),
);

const MCP: Endpoint[] = [
  {
    method: 'POST',
    route: '/api/mcp',
    auth: 'mcp',
    jsonRpc: true,
    body: () => rpcMessage as fc.Arbitrary<Record<string, unknown>>,
    bodyFields: ['jsonrpc', 'id', 'method', 'params'],
    holdsOpen: true, // wait_for_event may wait
    runs: 200,
  },
  { method: 'OPTIONS', route: '/api/mcp', auth: 'none', jsonRpc: true, runs: 20 },
  { method: 'ALL', route: '/api/mcp', auth: 'none', jsonRpc: true, runs: 20 },
];

export const ENDPOINTS: Endpoint[] = [...ACCOUNTS, ...OPERATIONS, ...EVENTS, ...WEBHOOKS, ...MCP];

/** The path of a request to `ep` for the fixture's account (`:id` filled in). */
export function pathOf(ep: Endpoint, f: Fixture): string {
  return ep.route.replace(':id', encodeURIComponent(f.id ?? 'none'));
}

/** The headers that authenticate `ep` as the fixture's account. */
export function credentialOf(ep: Endpoint, f: Fixture, ingestToken: string): Record<string, string> {
  switch (ep.auth) {
    case 'account':
      return bearer(ep.changesCredential || !f.account.apiKey ? f.account.token : f.account.apiKey);
    case 'mcp':
      return bearer(f.account.apiKey);
    case 'ingest':
      return bearer(ingestToken);
    default:
      return {};
  }
}
