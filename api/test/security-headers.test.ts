import net from 'node:net';
import { expect } from 'chai';
import type { RunningApi } from '../src/server.js';
import { bearer, createAccount, type TestAccount } from './support/accounts.js';
import { call, rawRequest, sharedApis, startTestApi } from './support/api.js';


/** Bytes Node's parser refuses: the answer comes from the server's clientError handler, not Koa. */
function malformed(base: string): Promise<string> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(url.port), url.hostname, () => socket.write('GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n'));
    let text = '';
    socket.on('data', (d) => (text += d.toString('latin1')));
    socket.on('end', () => resolve(text));
    socket.on('error', reject);
  });
}

describe('security headers', function () {
  this.timeout(60_000);
  let a: RunningApi;
  let acct: TestAccount;

  before(async () => {
    [a] = await sharedApis();
    acct = await createAccount(a.url);
  });

  it('X-Content-Type-Options: nosniff on every response: success, 404, 401, 405, bad JSON, metrics, a stream and a request the HTTP parser refuses', async () => {
    const cases: [string, string, Record<string, unknown>, number][] = [
      ['GET', '/healthz', {}, 200],
      ['GET', '/no/such/route', {}, 404],
      ['GET', '/api/v1/webhooks', {}, 401],
      ['DELETE', '/healthz', {}, 405],
      ['POST', '/api/auth/login', { raw: '{not json' }, 400],
      ['GET', '/metrics', {}, 200],
      ['GET', '/api/auth/me', { headers: bearer(acct.token) }, 200],
    ];
    for (const [method, path, opts, status] of cases) {
      const res = await call(a.url, method, path, opts);
      expect(res.status, `${method} ${path}`).to.equal(status);
      expect(res.headers.get('x-content-type-options'), `${method} ${path} ${status}`).to.equal('nosniff');
    }
    const minted = await call(a.url, 'POST', '/api/v1/events/stream-token', { headers: bearer(acct.apiKey) });
    const abort = new AbortController();
    const stream = await fetch(new URL(minted.body.stream_url, a.url), { signal: abort.signal });
    expect(stream.status).to.equal(200);
    expect(stream.headers.get('x-content-type-options')).to.equal('nosniff');
    expect(stream.headers.get('cache-control')).to.match(/^no-store/);
    abort.abort();
    const refused = await malformed(a.url);
    expect(refused).to.match(/^HTTP\/1\.1 400/);
    expect(refused.toLowerCase()).to.include('x-content-type-options: nosniff');
  });

  it('Cache-Control: no-store on authenticated responses (and their refusals), not on public ones', async () => {
    for (const [path, headers] of [
      ['/api/auth/me', bearer(acct.token)],
      ['/api/v1/events', { 'x-api-key': acct.apiKey }],
      ['/api/v1/webhooks', bearer(acct.apiKey)],
      ['/api/v1/webhooks', {}],
      ['/api/v1/events', bearer('not-a-token')],
    ] as [string, Record<string, string>][]) {
      const res = await call(a.url, 'GET', path, { headers });
      expect(res.headers.get('cache-control'), `${path} ${res.status}`).to.equal('no-store');
    }
    expect((await call(a.url, 'GET', '/healthz')).headers.get('cache-control')).to.equal(null);
  });

  it('stream_url is relative by default and never built from Host or X-Forwarded-Host', async () => {
    const api = await startTestApi({ TRUST_PROXY: 'true' });
    const who = await createAccount(api.url);
    const res = await rawRequest(api.url, 'POST', '/api/v1/events/stream-token', {
      authorization: `Bearer ${who.apiKey}`,
      host: 'evil.example',
      'x-forwarded-host': 'evil.example',
      'x-forwarded-proto': 'https',
    });
    expect(res.status).to.equal(201);
    const body = JSON.parse(res.body) as { token: string; stream_url: string };
    expect(body.stream_url).to.equal(`/api/v1/events/stream?token=${encodeURIComponent(body.token)}`);
    expect(res.body).to.not.include('evil.example');
  });

  it('stream_url starts with PUBLIC_BASE_URL when it is set, whatever the request says', async () => {
    const api = await startTestApi({ TRUST_PROXY: 'true', PUBLIC_BASE_URL: 'https://api.example.com/platform/' });
    const who = await createAccount(api.url);
    const res = await rawRequest(api.url, 'POST', '/api/v1/events/stream-token', { authorization: `Bearer ${who.apiKey}`, host: 'evil.example', 'x-forwarded-host': 'evil.example' });
    const body = JSON.parse(res.body) as { token: string; stream_url: string };
    expect(body.stream_url).to.equal(`https://api.example.com/platform/api/v1/events/stream?token=${encodeURIComponent(body.token)}`);
  });
});
