/**
 * Hostile input while MongoDB cannot be reached (an API pointed at a port
 * where nothing listens; nothing is killed): answers are 503 in the house
 * shape with Retry-After, and no body names a driver error, an address or a
 * port (regression: /readyz echoed "connect ECONNREFUSED 127.0.0.1:9").
 */
import { expect } from 'chai';
import type { RunningApi } from '../../src/server.js';
import { startTestApi } from '../support/api.js';
import { answer, describeRequest, type HostileRequest } from './support/http.js';
import { leakIn } from './support/oracle.js';
import { record } from './support/tally.js';

describe('hostile: requests during a MongoDB outage', function () {
  this.timeout(60_000);
  let api: RunningApi;

  before(async () => {
    // Port 9 (discard) on loopback: nothing listens there.
    api = await startTestApi({ MONGO_URL: 'mongodb://127.0.0.1:9/?serverSelectionTimeoutMS=1500', INSTANCE_ID: 'test-no-mongo' });
  });

  after(async () => {
    await api.close();
  });

  it('answers 503 in the house shape, naming no address, port or driver error', async () => {
    const key = 'svc_' + 'A'.repeat(43);
    const requests: HostileRequest[] = [
      { method: 'GET', path: '/readyz' },
      { method: 'POST', path: '/api/auth/login', body: JSON.stringify({ email: 'a@example.com', password: 'whatever-it-is' }) },
      { method: 'POST', path: '/api/auth/signup', body: JSON.stringify({ email: 'b@example.com', name: 'B', password: 'whatever-it-is' }) },
      { method: 'GET', path: '/api/auth/me', headers: { authorization: `Bearer ${key}` } },
      { method: 'GET', path: '/api/v1/events', headers: { 'x-api-key': key } },
    ];
    for (const req of requests) {
      const res = await answer(api.url, { ...req, timeoutMs: 20_000, acceptUnavailable: true });
      const what = describeRequest(req);
      expect(res.status, `${what}: ${res.text}`).to.equal(503);
      expect(res.headers.get('retry-after'), what).to.match(/^\d+$/);
      const body = JSON.parse(res.text);
      expect(body.error.code, what).to.equal('unavailable');
      // The message says what is down (the store itself, or the rate limits kept in it), in words a client can read.
      if (req.path !== '/readyz') expect(body.error.message, what).to.match(/^(Storage|Rate limiting) is unavailable, try again shortly$/);
      expect(leakIn(res.text), what).to.equal(null);
      expect(res.text, what).to.not.match(/127\.0\.0\.1|:9\b|localhost|mongodb:/);
      for (const d of body.error.details ?? []) expect(d.message, `${what} ${d.path}`).to.equal('not reachable');
    }
    record('limits', 'requests during a MongoDB outage', requests.length);
  });
});
