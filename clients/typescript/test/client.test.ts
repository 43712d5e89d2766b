import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { createAccount } from '../../../api/test/support/accounts.js';
import type { Receiver } from '../../../shared/test/support/receiver.js';
import { eventually } from '../../../shared/test/support/wait.js';
import {
  ApiError,
  AuthenticationError,
  ConflictError,
  ConnectionError,
  EventPlatform,
  EVENT_TYPES,
  NOT_OFFERED,
  NotFoundError,
  OPERATIONS,
  RateLimitError,
  UnavailableError,
  ValidationError,
  verifyWebhook,
  WebhookVerificationError,
  type RetryInfo,
} from '../src/index.js';
import { clientStack, type RestartableApi } from './support.js';

/** A local HTTP server answering from a script, to check what the client does with 429 and 503. */
async function scripted(replies: { status: number; headers?: Record<string, string>; body?: unknown }[]): Promise<{ url: string; hits: number; close: () => Promise<void> }> {
  const state = { hits: 0 };
  const server = http.createServer((req, res) => {
    req.resume();
    const reply = replies[Math.min(state.hits, replies.length - 1)]!;
    state.hits += 1;
    res.writeHead(reply.status, { 'content-type': 'application/json', ...reply.headers }).end(JSON.stringify(reply.body ?? {}));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get hits() {
      return state.hits;
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

const err = (code: string, message = code) => ({ error: { code, message, request_id: 'req_1' } });

describe('client: retries on 429 and 503', () => {
  it('waits exactly what Retry-After says (seconds), then succeeds', async () => {
    const server = await scripted([{ status: 429, headers: { 'retry-after': '1' }, body: err('rate_limited') }, { status: 200, body: { user: { id: 'usr_1' } } }]);
    const retries: RetryInfo[] = [];
    try {
      const client = new EventPlatform({ baseUrl: server.url, apiKey: 'svc_x', onRetry: (r) => retries.push(r) });
      const started = Date.now();
      const user = await client.auth.me();
      expect(user.id).to.equal('usr_1');
      expect(retries).to.deep.equal([{ method: 'GET', path: '/api/auth/me', attempt: 1, delayMs: 1000, status: 429, reason: 'rate_limited' }]);
      expect(Date.now() - started).to.be.at.least(1000);
      expect(server.hits).to.equal(2);
    } finally {
      await server.close();
    }
  });

  it('reads an HTTP-date Retry-After, and backs off exponentially without one', async () => {
    const server = await scripted([
      { status: 503, headers: { 'retry-after': new Date(Date.now() + 2000).toUTCString() }, body: err('unavailable') },
      { status: 503, body: err('unavailable') },
      { status: 503, body: err('unavailable') },
      { status: 201, body: { api_key: 'svc_new', preview: 'p', created_at: 'now' } },
    ]);
    const retries: RetryInfo[] = [];
    try {
      const client = new EventPlatform({ baseUrl: server.url, apiKey: 'svc_x', backoffBaseMs: 40, onRetry: (r) => retries.push(r) });
      expect((await client.auth.createApiKey()).api_key).to.equal('svc_new');
      expect(retries.map((r) => r.status)).to.deep.equal([503, 503, 503]);
      expect(retries[0]!.delayMs).to.be.within(1000, 2000);
      // Retry n waits base · 2^(n-1), jittered down to as little as half.
      expect(retries[1]!.delayMs).to.be.within(40, 80);
      expect(retries[2]!.delayMs).to.be.within(80, 160);
    } finally {
      await server.close();
    }
  });

  it('gives up after maxRetries with the typed error, and does not retry a Retry-After beyond maxRetryDelayMs', async () => {
    const server = await scripted([{ status: 429, headers: { 'retry-after': '0' }, body: err('too_many_streams', 'at most 6 streams') }]);
    try {
      const client = new EventPlatform({ baseUrl: server.url, apiKey: 'svc_x', maxRetries: 2 });
      const e = await client.events.createStreamToken().catch((x: unknown) => x);
      expect(e).to.be.instanceOf(RateLimitError).and.to.include({ status: 429, code: 'too_many_streams', message: 'at most 6 streams', requestId: 'req_1', retryAfter: 0 });
      expect(server.hits).to.equal(3);
    } finally {
      await server.close();
    }
    const slow = await scripted([{ status: 503, headers: { 'retry-after': '3600' }, body: err('unavailable') }]);
    try {
      const client = new EventPlatform({ baseUrl: slow.url, apiKey: 'svc_x' });
      const e = await client.webhooks.list().catch((x: unknown) => x);
      expect(e).to.be.instanceOf(UnavailableError).and.to.include({ code: 'unavailable', retryAfter: 3600 });
      expect(slow.hits).to.equal(1);
    } finally {
      await slow.close();
    }
  });

  it('does not retry other errors; a POST whose connection failed is not retried, a refused connection is', async () => {
    const server = await scripted([{ status: 500, body: err('internal') }]);
    try {
      const e = await new EventPlatform({ baseUrl: server.url, apiKey: 'svc_x' }).webhooks.list().catch((x: unknown) => x);
      expect(e).to.be.instanceOf(ApiError).and.to.include({ status: 500, code: 'internal' });
      expect(server.hits).to.equal(1);
    } finally {
      await server.close();
    }
    const retries: RetryInfo[] = [];
    const client = new EventPlatform({ baseUrl: server.url, apiKey: 'svc_x', backoffBaseMs: 10, maxRetries: 2, onRetry: (r) => retries.push(r) });
    const e = await client.webhooks.ping('wh_0').catch((x: unknown) => x);
    expect(e).to.be.instanceOf(ConnectionError);
    expect(retries.map((r) => r.reason)).to.deep.equal(['ECONNREFUSED', 'ECONNREFUSED']);
  });
});

describe('client: every route, against the real API and delivery process', function () {
  this.timeout(120_000);
  let api: RestartableApi;
  let receiver: Receiver;

  before(async () => {
    ({ api, receiver } = await clientStack());
  });

  it('has a method for each operation of the OpenAPI document', async () => {
    const doc = await new EventPlatform({ baseUrl: api.url }).openapi();
    const ids: string[] = [];
    for (const item of Object.values(doc.paths as Record<string, Record<string, { operationId?: string }>>)) {
      for (const op of Object.values(item)) if (op && typeof op === 'object' && op.operationId) ids.push(op.operationId);
    }
    const missing = ids.filter((id) => !(id in OPERATIONS) && !NOT_OFFERED.includes(id));
    expect(missing, 'operations with no client method (add them to clients/typescript/src/client.ts)').to.deep.equal([]);
    const client = new EventPlatform() as unknown as Record<string, Record<string, unknown>>;
    for (const path of Object.values(OPERATIONS)) {
      const [a, b] = path.split('.');
      const fn = b ? client[a!]?.[b] : client[a!];
      expect(fn, path).to.be.a('function');
    }
  });

  it('accounts: signup, login, me, key create/rotate/revoke, as typed errors when refused', async () => {
    const anon = new EventPlatform({ baseUrl: api.url });
    const email = `client-${Date.now()}-${Math.random().toString(16).slice(2)}@example.com`;
    const session = await anon.auth.signup({ email, name: 'Ada', password: 'analytical-engine' });
    expect(session.user).to.include({ email, name: 'Ada' });
    const dup = await anon.auth.signup({ email, name: 'Ada', password: 'analytical-engine' }).catch((x: unknown) => x);
    expect(dup).to.be.instanceOf(ConflictError).and.to.include({ code: 'conflict', status: 409 });
    const bad = await anon.auth.signup({ email: 'nope', name: '', password: 'x' }).catch((x: unknown) => x);
    expect(bad).to.be.instanceOf(ValidationError).and.to.include({ code: 'validation_failed' });
    expect((bad as ValidationError).details.map((d) => d.path)).to.include.members(['email', 'password']);
    const login = await anon.auth.login({ email, password: 'analytical-engine' });
    const viaToken = new EventPlatform({ baseUrl: api.url, token: login.token });
    const key = await viaToken.auth.createApiKey();
    expect(key.api_key).to.match(/^svc_/);
    const viaKey = new EventPlatform({ baseUrl: api.url, apiKey: key.api_key });
    expect((await viaKey.auth.me()).id).to.equal(session.user.id);
    await viaToken.auth.revokeApiKey();
    const revoked = await viaKey.auth.me().catch((x: unknown) => x);
    expect(revoked).to.be.instanceOf(AuthenticationError).and.to.include({ status: 401, code: 'unauthorized' });
    expect(await anon.health()).to.deep.equal({ status: 'ok' });
  });

  it('events: list pages by cursor, wait, stream token; ingest with the ingest token', async () => {
    const account = await createAccount(api.url);
    const client = new EventPlatform({ baseUrl: api.url, apiKey: account.apiKey, ingestToken: 'dev-only-ingest-token-change-me-000' });
    const sent = await client.ingest.send([1, 2, 3].map((i) => ({ account_id: account.userId, type: 'message.received' as const, data: { i } })));
    const all = await eventually(async () => {
      const got = [];
      for await (const e of client.events.all({ limit: 2 })) got.push(e);
      return got.length === 3 ? got : undefined;
    });
    expect(all.map((e) => e.id)).to.deep.equal(sent.map((e) => e.id));
    const page = await client.events.list({ since: sent[0]!.cursor, limit: 1 });
    expect(page.events.map((e) => e.id)).to.deep.equal([sent[1]!.id]);
    const waited = await client.events.wait({ since: sent[1]!.cursor, timeout_ms: 1000 });
    expect(waited.event?.id).to.equal(sent[2]!.id);
    const none = await client.events.wait({ since: sent[2]!.cursor, timeout_ms: 0 });
    expect(none).to.deep.include({ event: null, timed_out: true });
    expect((await client.events.createStreamToken()).token).to.match(/^svcst_/);
    const badCursor = await client.events.list({ since: 'c1_nonsense' }).catch((x: unknown) => x);
    expect(badCursor).to.be.instanceOf(ValidationError).and.to.include({ code: 'validation_failed' });
  });

  it('eventTypes: the catalog, one entry per event type the client knows, each with a data schema; refused without a credential', async () => {
    const account = await createAccount(api.url);
    const types = await new EventPlatform({ baseUrl: api.url, apiKey: account.apiKey }).eventTypes.list();
    expect(types.map((t) => t.type)).to.deep.equal([...EVENT_TYPES]);
    const started = types.find((t) => t.type === 'call.started')!;
    expect(started.description).to.match(/connects/);
    expect(started.data_schema).to.include({ type: 'object' });
    expect(started.data_schema.properties).to.include.keys('call_id', 'from', 'to');
    const anonymous = await new EventPlatform({ baseUrl: api.url }).eventTypes.list().catch((x: unknown) => x);
    expect(anonymous).to.be.instanceOf(AuthenticationError);
  });

  it('webhooks: create, get, update, list, reveal, ping, deliveries, stats, event detail, resend, delivery search, recover, replay, rotate, delete; the delivery passes verifyWebhook', async () => {
    const account = await createAccount(api.url);
    const client = new EventPlatform({ baseUrl: api.url, apiKey: account.apiKey });
    const created = await client.webhooks.create({ url: receiver.url('/client-e2e'), events: ['call.ended'], description: 'client test' });
    expect(created.secret).to.match(/^whsec_/);
    expect(await client.webhooks.revealSecret(created.id)).to.equal(created.secret);
    expect((await client.webhooks.get(created.id)).description).to.equal('client test');
    expect((await client.webhooks.update(created.id, { description: 'renamed' })).description).to.equal('renamed');
    expect(created.ordering).to.equal('unordered');
    expect((await client.webhooks.update(created.id, { ordering: 'fifo' })).ordering).to.equal('fifo');
    expect((await client.webhooks.list()).map((w) => w.id)).to.deep.equal([created.id]);
    const { event_id } = await client.webhooks.ping(created.id);
    const [req] = await receiver.waitFor('/client-e2e', 1);
    const event = verifyWebhook(req!.raw, req!.headers, created.secret);
    expect(event).to.include({ id: event_id, type: 'webhook.ping' });
    // The same delivery with a wrong secret, or replayed ten minutes later, is refused.
    expect(() => verifyWebhook(req!.raw, req!.headers, 'whsec_' + Buffer.alloc(32, 1).toString('base64'))).to.throw(WebhookVerificationError, /no webhook-signature matches/);
    expect(() => verifyWebhook(req!.raw, req!.headers, created.secret, { now: new Date(Date.now() + 600_000) })).to.throw(WebhookVerificationError).with.property('reason', 'timestamp_too_old');
    const attempts = await eventually(async () => {
      const list = await client.webhooks.deliveries(created.id, { limit: 5 });
      return list.length > 0 ? list : undefined;
    });
    expect(attempts[0]).to.include({ event_id, outcome: 'ok', status: 200 });
    const stats = await client.webhooks.stats(created.id, { window: '1h' });
    expect(stats).to.include({ webhook_id: created.id, window: '1h' });
    expect(stats.totals.succeeded).to.be.at.least(1);
    const detail = await eventually(() => client.events.deliveries(event_id).catch(() => undefined));
    expect(detail.event.id).to.equal(event_id);
    expect(detail.deliveries.map((d) => d.webhook_id)).to.include(created.id);
    expect(attempts[0]!.trigger).to.equal('event');
    // Resend (idempotent with a key), recover, replay.
    const key = `client-${created.id}`;
    const resent = await client.webhooks.resend(created.id, attempts[0]!.delivery_id, { idempotencyKey: key });
    expect(resent).to.include({ resent_from: attempts[0]!.delivery_id, event_id, trigger: 'resend' });
    expect(await client.webhooks.resend(created.id, attempts[0]!.delivery_id, { idempotencyKey: key })).to.deep.equal(resent);
    const [, again] = await receiver.waitFor('/client-e2e', 2);
    expect(again!.body.id).to.equal(event_id);
    expect(again!.headers['webhook-id']).to.equal(resent.delivery_id);
    // The search across subscriptions finds both attempts (a page of one, then its cursor); a bad status range is a ValidationError naming it.
    const found = await eventually(async () => {
      const got = [];
      for await (const a of client.webhooks.allDeliveries({ webhook_id: created.id, outcome: 'ok', status: '2xx', limit: 1 })) got.push(a);
      return got.length === 2 ? got : undefined;
    });
    expect(found.map((a) => a.delivery_id)).to.deep.equal([resent.delivery_id, attempts[0]!.delivery_id]);
    expect(found[0]).to.include({ webhook_id: created.id, event_id, trigger: 'resend' });
    expect((await client.webhooks.searchDeliveries({ outcome: 'failed' })).attempts).to.deep.equal([]);
    const badRange = await client.webhooks.searchDeliveries({ status: '599-500' }).catch((x: unknown) => x);
    expect(badRange).to.be.instanceOf(ValidationError);
    expect((badRange as ValidationError).details.map((d) => d.path)).to.deep.equal(['status']);
    expect(await client.webhooks.recover(created.id, { since: new Date(Date.now() - 3_600_000).toISOString() })).to.deep.equal({ queued: 0, truncated: false, next_since: null, next_after_id: null });
    const replayed = await client.webhooks.replay(created.id, { since: detail.event.cursor });
    expect(replayed).to.include({ queued: 0, truncated: false });
    const unknown = await client.webhooks.resend(created.id, `dlv_${'0'.repeat(24)}`).catch((x: unknown) => x);
    expect(unknown).to.be.instanceOf(NotFoundError);
    const rotated = await client.webhooks.rotateSecret(created.id, { grace_period_s: 0 });
    expect(rotated.secret).to.match(/^whsec_/).and.not.equal(created.secret);
    expect(rotated.previous_secret_expires_at).to.equal(null);
    expect(await client.webhooks.revealSecret(created.id)).to.equal(rotated.secret);
    await client.webhooks.delete(created.id);
    const gone = await client.webhooks.get(created.id).catch((x: unknown) => x);
    expect(gone).to.be.instanceOf(NotFoundError).and.to.include({ code: 'not_found', status: 404 });
    const refused = await client.webhooks.create({ url: 'http://example.com/x', events: ['*'] }).catch((x: unknown) => x);
    expect(refused).to.be.instanceOf(ValidationError);
  });
});
