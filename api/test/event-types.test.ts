/**
 * GET /api/v1/event-types against the shared API processes: the catalog with
 * either account credential, the same bytes and ETag from both processes, a
 * 304 for a current If-None-Match (through fetch, which adds
 * `Cache-Control: no-cache` to such a request), and the data shapes in the
 * OpenAPI document.
 */
import { expect } from 'chai';
import { EVENT_TYPES } from '#shared/eventlog/types.js';
import type { RunningApi } from '../src/server.js';
import { bearer, createAccount, type TestAccount } from './support/accounts.js';
import { call, sharedApis } from './support/api.js';

const PATH = '/api/v1/event-types';

describe('event-type catalog (GET /api/v1/event-types)', function () {
  this.timeout(30_000);
  let a: RunningApi;
  let b: RunningApi;
  let acct: TestAccount;

  before(async () => {
    [a, b] = await sharedApis();
    acct = await createAccount(a.url);
  });

  it('lists every type with its description and data schema, for a session token or an API key; no credential is a 401', async () => {
    const viaKey = await call(a.url, 'GET', PATH, { headers: { 'x-api-key': acct.apiKey } });
    expect(viaKey.status).to.equal(200);
    expect(viaKey.body.event_types.map((t: { type: string }) => t.type)).to.deep.equal([...EVENT_TYPES]);
    const ended = viaKey.body.event_types.find((t: { type: string }) => t.type === 'call.ended');
    expect(ended.description).to.match(/hangs up/);
    expect(ended.data_schema).to.include({ type: 'object' });
    expect(ended.data_schema.properties).to.have.keys('call_id', 'duration_s', 'hangup_by');
    expect(ended.data_schema).to.not.have.property('required');
    expect(viaKey.headers.get('ratelimit-limit'), 'charged to the key like every account route').to.equal(String(a.deps.config.limits.apiKeyPerMinute));

    const viaSession = await call(a.url, 'GET', PATH, { headers: bearer(acct.token) });
    expect(viaSession.status).to.equal(200);
    expect(viaSession.body).to.deep.equal(viaKey.body);

    const anonymous = await call(a.url, 'GET', PATH);
    expect(anonymous.status).to.equal(401);
    expect(anonymous.headers.get('cache-control')).to.equal('no-store');
  });

  it('is no-store like every answer behind a credential, with one ETag across API processes, and answers a current If-None-Match with 304', async () => {
    const fromA = await fetch(a.url + PATH, { headers: bearer(acct.apiKey) });
    const fromB = await fetch(b.url + PATH, { headers: bearer(acct.apiKey) });
    const etag = fromA.headers.get('etag');
    expect(etag).to.match(/^"[\w-]+"$/);
    expect(fromB.headers.get('etag'), 'the same catalog has the same tag on every pod').to.equal(etag);
    expect(await fromA.text()).to.equal(await fromB.text());
    expect(fromA.headers.get('cache-control')).to.equal('no-store');

    const again = await fetch(b.url + PATH, { headers: { ...bearer(acct.apiKey), 'if-none-match': etag! } });
    expect(again.status).to.equal(304);
    expect(await again.text()).to.equal('');
    expect(again.headers.get('etag')).to.equal(etag);
    const stale = await fetch(a.url + PATH, { headers: { ...bearer(acct.apiKey), 'if-none-match': '"an-older-catalog"' } });
    expect(stale.status).to.equal(200);
    expect(((await stale.json()) as { event_types: unknown[] }).event_types).to.have.length(EVENT_TYPES.length);
    const unauthenticated = await fetch(a.url + PATH, { headers: { 'if-none-match': etag! } });
    expect(unauthenticated.status, 'the tag is no credential').to.equal(401);
  });

  it('is in the OpenAPI document, with each data schema under components.schemas as the route serves it', async () => {
    const doc = (await call(a.url, 'GET', '/api/openapi.json')).body;
    const op = doc.paths[PATH].get;
    expect(op.operationId).to.equal('listEventTypes');
    expect(op.security).to.deep.include({ apiKey: [] }).and.deep.include({ session: [] });
    expect(op.responses['200'].content['application/json'].schema).to.deep.equal({ $ref: '#/components/schemas/EventTypeList' });
    expect(op.responses).to.have.property('304');
    const served = (await call(a.url, 'GET', PATH, { headers: bearer(acct.apiKey) })).body.event_types;
    const names = ['CallStartedData', 'CallEndedData', 'CallTranscribedData', 'CallCompletedData', 'CallTakeoverData', 'MessageReceivedData', 'MessageSentData', 'WebhookPingData'];
    names.forEach((name, i) => {
      const { $schema, ...schema } = served[i].data_schema;
      expect($schema).to.be.a('string');
      expect(doc.components.schemas[name], name).to.deep.equal(schema);
    });
  });
});
