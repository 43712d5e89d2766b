import { expect } from 'chai';
import type { RunningApi } from '../src/server.js';
import { call, startTestApi } from './support/api.js';

describe('api foundation', () => {
  let api: RunningApi;

  before(async () => {
    api = await startTestApi();
    // A route that fails the way a bug would, to prove the 500 path leaks nothing.
    api.server.removeAllListeners('request');
    const { createApp } = await import('../src/app.js');
    const app = createApp(api.deps);
    app.use((ctx) => {
      if (ctx.path === '/__boom') throw new Error('secret internal detail at db.users');
    });
    api.server.on('request', app.callback());
  });

  it('serves /healthz', async () => {
    const res = await call(api.url, 'GET', '/healthz');
    expect(res.status).to.equal(200);
    expect(res.body).to.deep.equal({ status: 'ok' });
  });

  it('reports ready when MongoDB and Kafka answer', async () => {
    const res = await call(api.url, 'GET', '/readyz');
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body.checks).to.deep.equal({ mongo: 'ok', kafka: 'ok' });
  });

  it('answers an unknown route with a 404 JSON error and a request id', async () => {
    const res = await call(api.url, 'GET', '/nope');
    expect(res.status).to.equal(404);
    expect(res.body.error.code).to.equal('not_found');
    expect(res.body.error.request_id).to.be.a('string').and.equal(res.headers.get('x-request-id'));
  });

  it('echoes a sane incoming X-Request-Id and replaces a hostile one', async () => {
    const sane = await call(api.url, 'GET', '/healthz', { headers: { 'x-request-id': 'abc-123' } });
    expect(sane.headers.get('x-request-id')).to.equal('abc-123');
    const hostile = await call(api.url, 'GET', '/healthz', { headers: { 'x-request-id': 'a b<script>' } });
    expect(hostile.headers.get('x-request-id')).to.not.equal('a b<script>');
  });

  it('answers malformed JSON with a 400 JSON error', async () => {
    const res = await call(api.url, 'POST', '/api/auth/login', { raw: '{"a":' });
    expect(res.status).to.equal(400);
    expect(res.body.error.code).to.equal('invalid_json');
  });

  it('answers a body over the 1 MB limit with 413', async () => {
    const res = await call(api.url, 'POST', '/api/auth/login', { raw: JSON.stringify({ big: 'x'.repeat(1_100_000) }) });
    expect(res.status).to.equal(413);
    expect(res.body.error.code).to.equal('payload_too_large');
  });

  it('refuses a non-JSON body with 415', async () => {
    const res = await call(api.url, 'POST', '/api/auth/login', { raw: 'a=1', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    expect(res.status).to.equal(415);
    expect(res.body.error.code).to.equal('unsupported_media_type');
  });

  it('turns an unexpected error into a 500 that leaks no detail', async () => {
    const res = await call(api.url, 'GET', '/__boom');
    expect(res.status).to.equal(500);
    expect(res.body.error).to.include({ code: 'internal', message: 'Internal server error' });
    expect(JSON.stringify(res.body)).to.not.match(/secret|db\.users|at \w+ \(/);
  });

  it('answers a wrong method with 405', async () => {
    const res = await call(api.url, 'DELETE', '/healthz');
    expect(res.status).to.equal(405);
    expect(res.body.error.code).to.equal('method_not_allowed');
  });
});

describe('readiness without MongoDB', () => {
  it('returns 503 from /readyz while MongoDB is unreachable, and stays alive', async function () {
    this.timeout(20_000);
    // Port 9 (discard) on loopback: nothing listens there.
    const api = await startTestApi({ MONGO_URL: 'mongodb://127.0.0.1:9/' });
    try {
      const res = await call(api.url, 'GET', '/readyz');
      expect(res.status).to.equal(503);
      expect(res.headers.get('retry-after')).to.equal('5');
      expect(res.body.error.code).to.equal('unavailable');
      expect(res.body.error.details.map((d: { path: string }) => d.path)).to.include('mongo');
      const health = await call(api.url, 'GET', '/healthz');
      expect(health.status).to.equal(200);
    } finally {
      await api.close();
    }
  });
});
