import http from 'node:http';
import { expect } from 'chai';
import type { RunningApi } from '../src/server.js';
import { bearer, createAccount, type TestAccount } from './support/accounts.js';
import { sharedApis } from './support/api.js';

/**
 * node:http, not fetch: these requests need header lines fetch will not send as written
 * (an empty value, the same header twice).
 */
function get(base: string, path: string, headers: [string, string][]): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: any }> {
  return new Promise((resolve, reject) => {
    const url = new URL(path, base);
    // Headers as a raw list (each line as written): Node adds no Host to those.
    const req = http.request(url, { method: 'GET', headers: [['Host', url.host], ...headers].flat() }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text ? JSON.parse(text) : text });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

const pairs = (h: Record<string, string>): [string, string][] => Object.entries(h);

describe('ambiguous credentials: every credential presented must be the one valid credential', () => {
  let api: RunningApi;
  let acct: TestAccount;
  let other: TestAccount;

  before(async () => {
    [api] = await sharedApis();
    acct = await createAccount(api.url);
    other = await createAccount(api.url);
  });

  async function expectRefused(headers: [string, string][]): Promise<void> {
    const res = await get(api.url, '/api/auth/me', headers);
    expect(res.status, `${JSON.stringify(headers.map(([n, v]) => [n, v.slice(0, 12)]))}: ${JSON.stringify(res.body)}`).to.equal(401);
    expect(res.headers['www-authenticate']).to.equal('Bearer');
    expect(res.body.error.code).to.equal('unauthorized');
  }

  it('accepts the key alone in either header, and the same key in both (the controls)', async () => {
    for (const headers of [pairs(bearer(acct.apiKey)), [['X-API-Key', acct.apiKey]], [...pairs(bearer(acct.apiKey)), ['X-API-Key', acct.apiKey]]] as [string, string][][]) {
      const res = await get(api.url, '/api/auth/me', headers);
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(res.body.user.id).to.equal(acct.userId);
    }
  });

  it('refuses an invalid Authorization beside a valid X-API-Key: empty, another scheme, a bad token', async () => {
    await expectRefused([['Authorization', ''], ['X-API-Key', acct.apiKey]]);
    await expectRefused([['Authorization', '   '], ['X-API-Key', acct.apiKey]]);
    await expectRefused([['Authorization', 'Basic dXNlcjpwYXNz'], ['X-API-Key', acct.apiKey]]);
    await expectRefused([['Authorization', 'Bearer not-a-token'], ['X-API-Key', acct.apiKey]]);
  });

  it('refuses an empty X-API-Key beside a valid bearer credential', async () => {
    await expectRefused([...pairs(bearer(acct.apiKey)), ['X-API-Key', '']]);
    await expectRefused([...pairs(bearer(acct.token)), ['X-API-Key', ' ']]);
  });

  it('refuses a header sent twice, even when one of the two is valid (Node keeps only the first Authorization)', async () => {
    await expectRefused([['Authorization', `Bearer ${acct.apiKey}`], ['Authorization', 'Bearer not-a-token']]);
    await expectRefused([['Authorization', `Bearer ${acct.apiKey}`], ['Authorization', `Bearer ${acct.apiKey}`]]);
    await expectRefused([['X-API-Key', acct.apiKey], ['X-API-Key', acct.apiKey]]);
  });

  it('refuses two valid credentials, of different accounts or of the same one', async () => {
    await expectRefused([...pairs(bearer(acct.apiKey)), ['X-API-Key', other.apiKey]]);
    await expectRefused([...pairs(bearer(other.token)), ['X-API-Key', acct.apiKey]]);
    await expectRefused([...pairs(bearer(acct.token)), ['X-API-Key', acct.apiKey]]);
  });
});
