import http from 'node:http';
import { expect } from 'chai';
import type { RunningApi } from '../src/server.js';
import { startTestApi } from './support/api.js';

/** fetch() refuses TRACE (a forbidden method), so these requests go through node:http. */
function raw(base: string, method: string, path: string): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: unknown }> {
  return new Promise((resolve, reject) => {
    const req = http.request(new URL(path, base), { method }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch {
          // not JSON: the assertion on the body says so
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

describe('HTTP methods the routes do not take', () => {
  let api: RunningApi;
  before(async () => {
    api = await startTestApi();
  });

  for (const method of ['TRACE', 'QUERY']) {
    it(`answers ${method} on a route with 501 not_implemented in the JSON error shape, with Allow`, async () => {
      const res = await raw(api.url, method, '/healthz');
      expect(res.status, JSON.stringify(res.body)).to.equal(501);
      const body = res.body as { error: { code: string; message: string; request_id: string } };
      expect(body.error.code).to.equal('not_implemented');
      expect(body.error.message).to.be.a('string').and.match(new RegExp(method));
      expect(body.error.request_id).to.be.a('string').and.equal(res.headers['x-request-id']);
      expect(res.headers['content-type']).to.match(/^application\/json/);
      expect(res.headers.allow).to.match(/\bGET\b/);
    });
  }

  it('answers TRACE on an unrouted path with 501 and no empty Allow', async () => {
    const res = await raw(api.url, 'TRACE', '/nope');
    expect(res.status).to.equal(501);
    expect((res.body as { error: { code: string } }).error.code).to.equal('not_implemented');
    expect(res.headers).to.not.have.property('allow');
  });

  it('answers a known method a path does not take with 405 method_not_allowed and Allow listing what it takes', async () => {
    const res = await raw(api.url, 'DELETE', '/healthz');
    expect(res.status).to.equal(405);
    const body = res.body as { error: { code: string; request_id: string } };
    expect(body.error.code).to.equal('method_not_allowed');
    expect(body.error.request_id).to.equal(res.headers['x-request-id']);
    expect(res.headers.allow).to.match(/\bGET\b/);
    expect(res.headers.allow).to.not.match(/DELETE/);
  });

  it('answers PUT on a POST-and-GET collection with 405 and both methods in Allow', async () => {
    const res = await raw(api.url, 'PUT', '/api/v1/webhooks');
    expect(res.status).to.equal(405);
    expect(res.headers.allow).to.match(/\bGET\b/).and.match(/\bPOST\b/);
  });
});
