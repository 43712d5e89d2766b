import { Validator } from '@seriousme/openapi-schema-validator';
import { expect } from 'chai';
import { DEV_INGEST_TOKEN } from '../src/config.js';
import { createApp } from '../src/app.js';
import { SignupBody } from '../src/features/auth/schemas.js';
import { ListEventsQuery, WaitBody } from '../src/features/events/schemas.js';
import { Components } from '../src/features/openapi/generate.js';
import type { RunningApi } from '../src/server.js';
import { Receiver } from '#test-support/receiver.js';
import { deliveryTestEnv, startTestDelivery, waitForGroup } from '../../delivery/test/support/delivery.js';
import type { RunningDelivery } from '../../delivery/src/worker.js';
import { bearer, createAccount } from './support/accounts.js';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type Router from '@koa/router';
import { routesOf } from '../src/middleware/route.js';
import { call, checkedResponses, checkResponses, checksResponsesOf, sharedApis } from './support/api.js';
import { eventually, fakeAccountId } from './support/events.js';
import { compileEverySchema, HTTP_METHODS, registeredRoutes, ResponseChecker } from './support/openapi.js';
import { webhookApi, webhookTestEnv } from './support/webhooks.js';

type Json = Record<string, any>;

describe('OpenAPI document: GET /api/openapi.json', function () {
  this.timeout(60_000);
  let a: RunningApi;
  let doc: Json;
  let checker: ResponseChecker;

  before(async () => {
    [a] = await sharedApis();
    const res = await call(a.url, 'GET', '/api/openapi.json');
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.match(/^application\/json/);
    doc = res.body;
    checker = new ResponseChecker(doc);
  });

  it('is a valid OpenAPI 3.1 document whose references all resolve', async () => {
    const validator = new Validator();
    const result = await validator.validate(structuredClone(doc));
    expect(result.errors ?? [], JSON.stringify(result.errors, null, 2)).to.deep.equal([]);
    expect(result.valid).to.equal(true);
    expect(validator.version).to.equal('3.1');
    expect(() => validator.resolveRefs()).not.to.throw();
  });

  it('holds only schemas that compile as strict JSON Schema 2020-12', () => {
    expect(compileEverySchema(doc)).to.be.above(30);
  });

  it('documents every route registered on the routers, and nothing that is not routed', () => {
    const routes = registeredRoutes(createApp(a.deps));
    expect(routes.length).to.be.above(10);
    const missing: string[] = [];
    for (const { path, methods } of routes) {
      const item = doc.paths[path] as Json | undefined;
      if (methods.includes('*')) {
        if (!item) missing.push(`* ${path}`);
        continue;
      }
      for (const method of methods) if (!item?.[method]) missing.push(`${method.toUpperCase()} ${path}`);
    }
    expect(missing, 'routes missing from the document').to.deep.equal([]);

    const stale: string[] = [];
    for (const [path, item] of Object.entries(doc.paths as Json)) {
      for (const method of HTTP_METHODS.filter((m) => m in item)) {
        if (!routes.some((r) => r.path === path && (r.methods.includes(method) || r.methods.includes('*')))) stale.push(`${method.toUpperCase()} ${path}`);
      }
    }
    expect(stale, 'documented operations with no route').to.deep.equal([]);
  });

  it('gives every operation a unique operationId, a security requirement and an error response', () => {
    const ids = new Set<string>();
    for (const [path, item] of Object.entries(doc.paths as Json)) {
      for (const method of HTTP_METHODS.filter((m) => m in item)) {
        const op = item[method];
        expect(op.operationId, `${method} ${path}`).to.be.a('string');
        expect(ids.has(op.operationId), `duplicate operationId ${op.operationId}`).to.equal(false);
        ids.add(op.operationId);
        expect(op.security, `${method} ${path} security`).to.be.an('array');
        if (!path.startsWith('/dashboard') && path !== '/healthz' && path !== '/api/openapi.json') {
          expect(Object.keys(op.responses).some((s) => s === 'default' || /^[45]/.test(s)), `${method} ${path} errors`).to.equal(true);
        }
      }
    }
  });

  it('describes each request with the very schema its route validates with', () => {
    const asDocumented = (shape: unknown) => new Components().schema(shape);
    expect(doc.paths['/api/auth/signup'].post.requestBody.content['application/json'].schema).to.deep.equal(asDocumented(SignupBody));
    expect(doc.paths['/api/v1/events/wait'].post.requestBody.content['application/json'].schema).to.deep.equal(asDocumented(WaitBody));
    const params = doc.paths['/api/v1/events'].get.parameters as Json[];
    expect(params.map((p) => p.name)).to.deep.equal(Object.keys(ListEventsQuery.properties));
    // ajv's `nullable` became a JSON Schema 2020-12 type list.
    expect(doc.paths['/api/auth/signup'].post.requestBody.content['application/json'].schema.properties.phone.type).to.deep.equal(['string', 'null']);
  });

  it('declares the security schemes: session JWT, API key (bearer and X-API-Key), stream token, ingest token', () => {
    const schemes = doc.components.securitySchemes;
    expect(schemes.session).to.include({ type: 'http', scheme: 'bearer', bearerFormat: 'JWT' });
    expect(schemes.apiKey).to.include({ type: 'http', scheme: 'bearer' });
    expect(schemes.apiKeyHeader).to.include({ type: 'apiKey', in: 'header', name: 'X-API-Key' });
    expect(schemes.streamToken).to.include({ type: 'apiKey', in: 'query', name: 'token' });
    expect(schemes.ingestToken).to.include({ type: 'http', scheme: 'bearer' });
    expect(doc.paths['/internal/v1/events'].post.security).to.deep.equal([{ ingestToken: [] }]);
    expect(doc.paths['/api/v1/events/stream'].get.security).to.deep.equal([{ streamToken: [] }]);
    expect(doc.paths['/api/v1/events/stream'].get.responses['200'].content).to.have.property('text/event-stream');
  });

  it('matches what the routes really answer, field for field', async () => {
    const seen: string[] = [];
    const expectDoc = async (method: string, template: string, path: string, opts: Parameters<typeof call>[3] = {}) => {
      const res = await call(a.url, method, path, opts);
      checker.check(method, template, res.status, res.body);
      seen.push(`${method} ${template} ${res.status}`);
      return res;
    };
    const email = `openapi-${fakeAccountId()}@example.com`;
    const signup = await expectDoc('POST', '/api/auth/signup', '/api/auth/signup', { body: { email, name: 'Doc Tester', password: 'long-enough-pw', phone: '+1 555 0100' } });
    expect(signup.status).to.equal(201);
    await expectDoc('POST', '/api/auth/signup', '/api/auth/signup', { body: { email: 'nope', name: '', password: 'short', extra: 1 } });
    await expectDoc('POST', '/api/auth/signup', '/api/auth/signup', { body: { email, name: 'Again', password: 'long-enough-pw' } });
    await expectDoc('POST', '/api/auth/login', '/api/auth/login', { body: { email, password: 'long-enough-pw' } });
    await expectDoc('POST', '/api/auth/login', '/api/auth/login', { body: { email, password: 'wrong-password' } });
    const session = bearer(signup.body.token);
    await expectDoc('GET', '/api/auth/me', '/api/auth/me', { headers: session });
    await expectDoc('GET', '/api/auth/me', '/api/auth/me');
    const key = await expectDoc('POST', '/api/auth/api-key', '/api/auth/api-key', { headers: session });
    const withKey = bearer(key.body.api_key);
    await expectDoc('GET', '/api/auth/me', '/api/auth/me', { headers: { 'x-api-key': key.body.api_key } });

    const ingested = await expectDoc('POST', '/internal/v1/events', '/internal/v1/events', {
      headers: bearer(DEV_INGEST_TOKEN),
      body: {
        events: [
          { account_id: signup.body.user.id, type: 'call.started', data: { call_id: 'c1' }, occurred_at: new Date().toISOString() },
          { account_id: signup.body.user.id, type: 'call.ended', data: { call_id: 'c1' } },
        ],
      },
    });
    await expectDoc('POST', '/internal/v1/events', '/internal/v1/events', { headers: bearer(DEV_INGEST_TOKEN), body: { events: [{ type: 'nope' }] } });
    await expectDoc('POST', '/internal/v1/events', '/internal/v1/events', { body: {} });
    const [first, second] = ingested.body.events;
    const waited = await expectDoc('POST', '/api/v1/events/wait', '/api/v1/events/wait', { headers: withKey, body: { since: first.cursor, timeout_ms: 10_000 } });
    expect(waited.body.event.id).to.equal(second.id);
    await expectDoc('POST', '/api/v1/events/wait', '/api/v1/events/wait', { headers: withKey, body: { types: ['call.ended'], timeout_ms: 0 } });
    const page = await expectDoc('GET', '/api/v1/events', `/api/v1/events?since=${first.cursor}`, { headers: withKey });
    expect(page.body.events.map((e: Json) => e.id)).to.deep.equal([second.id]);
    await expectDoc('GET', '/api/v1/events', '/api/v1/events?limit=0', { headers: withKey });
    await expectDoc('POST', '/api/v1/events/stream-token', '/api/v1/events/stream-token', { headers: withKey });
    await expectDoc('GET', '/api/v1/events/stream', '/api/v1/events/stream?token=' + key.body.api_key);
    const rpc = (method: string, params: Json, id: number | null = 1) => ({ jsonrpc: '2.0', ...(id === null ? {} : { id }), method, params });
    const mcp = await expectDoc('POST', '/api/mcp', '/api/mcp', { body: rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'doc-test', version: '1' } }) });
    expect(mcp.body.result.protocolVersion).to.equal('2025-06-18');
    await expectDoc('POST', '/api/mcp', '/api/mcp', { body: rpc('notifications/initialized', {}, null) });
    await expectDoc('POST', '/api/mcp', '/api/mcp', { body: [rpc('tools/list', {}, 2), rpc('ping', {}, 3)] });
    const whoami = await expectDoc('POST', '/api/mcp', '/api/mcp', { headers: { ...withKey, 'mcp-protocol-version': '2025-06-18' }, body: rpc('tools/call', { name: 'whoami', arguments: {} }) });
    expect(whoami.body.result?.structuredContent?.account_id, JSON.stringify(whoami.body)).to.equal(signup.body.user.id);
    await expectDoc('POST', '/api/mcp', '/api/mcp', { body: rpc('tools/call', { name: 'whoami', arguments: {} }) });
    await expectDoc('POST', '/api/mcp', '/api/mcp', { raw: '{not json' });
    await expectDoc('GET', '/api/mcp', '/api/mcp');
    await expectDoc('DELETE', '/api/auth/api-key', '/api/auth/api-key', { headers: session });
    await expectDoc('DELETE', '/api/auth/api-key', '/api/auth/api-key', { headers: session });
    await expectDoc('GET', '/healthz', '/healthz');
    await expectDoc('GET', '/readyz', '/readyz');

    expect(seen).to.include.members(['POST /api/auth/signup 201', 'POST /api/auth/signup 400', 'POST /api/auth/signup 409', 'POST /api/auth/login 401', 'GET /api/auth/me 401']);
    expect(seen).to.include.members(['POST /api/mcp 200', 'POST /api/mcp 202', 'POST /api/mcp 401', 'POST /api/mcp 400', 'GET /api/mcp 405']);
    expect(seen).to.include.members(['POST /internal/v1/events 202', 'POST /api/v1/events/wait 200', 'GET /api/v1/events 400', 'DELETE /api/auth/api-key 404', 'GET /readyz 200']);
  });

  it('fails the check for a field the document does not describe', () => {
    expect(() => checker.check('GET', '/healthz', 200, { status: 'ok', surprise: true })).to.throw(/does not match/);
  });

  it('is generated only: every route on the routers was registered through route() with its document entry', () => {
    const undocumented: string[] = [];
    let layers = 0;
    for (const fn of createApp(a.deps).middleware) {
      const router = (fn as unknown as { router?: Router }).router;
      if (!router) continue;
      const registered = routesOf(router);
      for (const layer of router.stack) {
        if (layer.methods.length === 0) continue;
        layers += 1;
        const path = String(layer.path).replace(/:([A-Za-z0-9_]+)/g, '{$1}');
        const all = layer.methods.length > HTTP_METHODS.length;
        const entry = registered.find((r) => r.path === path && (all ? r.method === 'all' : layer.methods.includes(r.method.toUpperCase())));
        if (!entry?.doc) undocumented.push(`${layer.methods.join(',')} ${path}`);
      }
    }
    expect(layers).to.be.above(20);
    expect(undocumented, 'routes registered without a document entry').to.deep.equal([]);
    // Every operation in the served document comes from a registered route: the same count both ways.
    const operations = Object.values(doc.paths as Json).reduce((n: number, item: Json) => n + HTTP_METHODS.filter((m) => m in item).length, 0);
    expect(operations).to.equal(layers);
  });

  it('checks every JSON response call() receives from a test API against the document, and fails a wrong shape', async () => {
    expect(checksResponsesOf(a.url), 'the shared test APIs are checked').to.equal(true);
    const before = checkedResponses();
    await call(a.url, 'GET', '/api/auth/me');
    expect(checkedResponses(), 'a call to a shared test API was checked').to.equal(before + 1);
    // The real app with one defect injected: /healthz answers a field its shape does not have.
    const app = createApp(a.deps);
    app.middleware.unshift(async (ctx, next) => {
      await next();
      if (ctx.path === '/healthz' && ctx.query.defect === '1') ctx.body = { status: 'ok', uptime: 1 };
    });
    const server = http.createServer(app.callback());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      checkResponses({ url, deps: a.deps }, app);
      expect((await call(url, 'GET', '/healthz')).body).to.deep.equal({ status: 'ok' });
      let caught: unknown;
      await call(url, 'GET', '/healthz?defect=1').catch((err: unknown) => (caught = err));
      expect(String(caught)).to.match(/GET \/healthz 200 does not match the document: .*must NOT have additional properties/);
      // An error answer is checked too, against the shared Error shape.
      expect((await call(url, 'GET', '/api/auth/me')).status).to.equal(401);
    } finally {
      server.close();
    }
  });
});

describe('OpenAPI document: webhook responses (with a delivery process and a receiver)', function () {
  this.timeout(60_000);
  let api: RunningApi;
  let receiver: Receiver;
  let worker: RunningDelivery;
  let checker: ResponseChecker;

  before(async function () {
    this.timeout(120_000);
    receiver = await Receiver.start();
    ({ api } = await webhookApi());
    const env = deliveryTestEnv(receiver.caFile, webhookTestEnv());
    worker = await startTestDelivery(env);
    await waitForGroup(env);
    checker = new ResponseChecker((await call(api.url, 'GET', '/api/openapi.json')).body);
  });
  after(async () => {
    await worker.close(); // not left running beside other tests' delivery processes
    await receiver.close();
  });

  it('matches what the webhook routes really answer, attempts included', async () => {
    const seen: string[] = [];
    const who = await createAccount(api.url);
    const expectDoc = async (method: string, template: string, path: string, body?: unknown) => {
      const res = await call(api.url, method, path, { headers: bearer(who.apiKey), body });
      checker.check(method, template, res.status, res.body);
      seen.push(`${method} ${template} ${res.status}`);
      return res;
    };
    const created = await expectDoc('POST', '/api/v1/webhooks', '/api/v1/webhooks', { url: receiver.url('/openapi-doc'), events: ['*'], description: 'doc check' });
    expect(created.status).to.equal(201);
    await expectDoc('POST', '/api/v1/webhooks', '/api/v1/webhooks', { url: 'http://example.com/plain', events: ['nope'] });
    const id: string = created.body.id;
    await expectDoc('GET', '/api/v1/webhooks', '/api/v1/webhooks');
    await expectDoc('POST', '/api/v1/webhooks/{id}/secret', `/api/v1/webhooks/${id}/secret`);
    await expectDoc('POST', '/api/v1/webhooks/{id}/secret/rotate', `/api/v1/webhooks/${id}/secret/rotate`, { grace_period_s: 60 });
    await expectDoc('POST', '/api/v1/webhooks/{id}/secret/rotate', `/api/v1/webhooks/${id}/secret/rotate`, { grace_period_s: 0 });
    await expectDoc('POST', '/api/v1/webhooks/{id}/secret/rotate', `/api/v1/webhooks/${id}/secret/rotate`, { grace_period_s: -1 });
    await expectDoc('POST', '/api/v1/webhooks/{id}/ping', `/api/v1/webhooks/${id}/ping`);
    await receiver.waitFor('/openapi-doc', 1);
    const attempts = await eventually(async () => {
      const res = await call(api.url, 'GET', `/api/v1/webhooks/${id}/deliveries`, { headers: bearer(who.apiKey) });
      return res.body.attempts?.length > 0 ? res : undefined;
    });
    checker.check('GET', '/api/v1/webhooks/{id}/deliveries', attempts.status, attempts.body);
    expect(attempts.body.attempts[0]).to.include({ outcome: 'ok', status: 200, event_type: 'webhook.ping' });
    const delivered = await eventually(async () => {
      const res = await call(api.url, 'GET', `/api/v1/webhooks/${id}`, { headers: bearer(who.apiKey) });
      return res.body.last_status === 200 ? res : undefined;
    });
    checker.check('GET', '/api/v1/webhooks/{id}', delivered.status, delivered.body);
    await expectDoc('GET', '/api/v1/webhooks/{id}/deliveries', `/api/v1/webhooks/${id}/deliveries?limit=999`);
    await expectDoc('DELETE', '/api/v1/webhooks/{id}', `/api/v1/webhooks/${id}`);
    await expectDoc('GET', '/api/v1/webhooks/{id}', `/api/v1/webhooks/${id}`);
    expect(seen).to.include.members([
      'POST /api/v1/webhooks 201',
      'POST /api/v1/webhooks 400',
      'GET /api/v1/webhooks 200',
      'POST /api/v1/webhooks/{id}/secret 200',
      'POST /api/v1/webhooks/{id}/secret/rotate 200',
      'POST /api/v1/webhooks/{id}/secret/rotate 400',
      'POST /api/v1/webhooks/{id}/ping 202',
      'GET /api/v1/webhooks/{id}/deliveries 400',
      'DELETE /api/v1/webhooks/{id} 204',
      'GET /api/v1/webhooks/{id} 404',
    ]);
  });
});
