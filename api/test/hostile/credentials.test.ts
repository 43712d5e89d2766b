/**
 * The credential matrix: every authenticated endpoint in the table, with
 * every credential that must be refused, gets a 401 in the house shape with
 * WWW-Authenticate: Bearer, and the victim's state is untouched afterwards.
 */
import { expect } from 'chai';
import fc from 'fast-check';
import type { RunningApi } from '../../src/server.js';
import { bearer, type TestAccount } from '../support/accounts.js';
import { call, sharedApis } from '../support/api.js';
import { badCredentials, badStreamTokens, type BadCredential } from './support/credentials.js';
import { mintStreamToken } from './support/fixtures.js';
import { ENDPOINTS, endpointName, pathOf, type Endpoint, type Fixture } from './support/endpoints.js';
import { answer, describeRequest, type HostileRequest } from './support/http.js';
import { assertSafe } from './support/oracle.js';
import { record } from './support/tally.js';

/** One valid request to `ep` for the fixture, before its credential is swapped. */
function validRequest(ep: Endpoint, f: Fixture): HostileRequest {
  const body = ep.body ? JSON.stringify(fc.sample(ep.body(f), { numRuns: 1, seed: 7 })[0]) : undefined;
  const query = ep.query ? new URLSearchParams(fc.sample(ep.query(f), { numRuns: 1, seed: 7 })[0]).toString() : '';
  const path = pathOf(ep, f);
  return { method: ep.method, path: query ? `${path}?${query}` : path, body, timeoutMs: 10_000 };
}

async function expectRefused(api: RunningApi, req: HostileRequest, cred: BadCredential): Promise<void> {
  const full = { ...req, headers: { ...req.headers, ...cred.headers } };
  const res = await answer(api.url, full);
  const what = `${cred.label}: ${describeRequest(full)}`;
  assertSafe(res, what);
  expect(res.status, `${what} -> ${res.text.slice(0, 200)}`).to.equal(401);
  expect(res.json.error.code, what).to.equal('unauthorized');
  expect(res.headers.get('www-authenticate'), what).to.equal('Bearer');
}

describe('hostile: credential matrix', function () {
  this.timeout(120_000);
  let apis: [RunningApi, RunningApi];
  let victim: TestAccount;
  let creds: BadCredential[];
  let keyHashBefore: string | undefined;

  before(async () => {
    apis = await sharedApis();
    ({ victim, creds } = await badCredentials(apis[0], (v) => mintStreamToken(apis[0], v.apiKey)));
    keyHashBefore = (await apis[0].deps.mongo.collections.apiKeys.findOne({ _id: victim.userId }))?.hash;
  });

  for (const ep of ENDPOINTS.filter((e) => e.auth === 'account')) {
    it(`refuses every bad credential on ${endpointName(ep)} with 401`, async () => {
      const req = validRequest(ep, { account: victim });
      let n = 0;
      for (const cred of creds) {
        await expectRefused(apis[n % 2]!, req, cred);
        n += 1;
      }
      record('credentials', endpointName(ep), n);
    });
  }

  for (const ep of ENDPOINTS.filter((e) => e.auth === 'stream_token')) {
    it(`refuses every token but a live stream token in the URL of ${endpointName(ep)} with 401`, async () => {
      const tokens = badStreamTokens(apis[0], victim);
      let n = 0;
      for (const { label, token } of tokens) {
        const path = token === null ? pathOf(ep, { account: victim }) : `${pathOf(ep, { account: victim })}?token=${encodeURIComponent(token)}`;
        await expectRefused(apis[n % 2]!, { method: ep.method, path, timeoutMs: 5000 }, { label, headers: {} });
        // A valid credential in a header does not stand in for the token either.
        await expectRefused(apis[n % 2]!, { method: ep.method, path, timeoutMs: 5000 }, { label: `${label} + API key header`, headers: bearer(victim.apiKey) });
        n += 2;
      }
      record('credentials', endpointName(ep), n);
    });
  }

  for (const ep of ENDPOINTS.filter((e) => e.auth === 'ingest')) {
    it(`refuses anything but the ingest token on ${endpointName(ep)} with 401`, async () => {
      const ingestToken = apis[0].deps.config.ingestToken;
      const wrong: BadCredential[] = [
        { label: 'no credential', headers: {} },
        { label: "a user's API key", headers: bearer(victim.apiKey) },
        { label: "a user's session token", headers: bearer(victim.token) },
        { label: 'the ingest token in X-API-Key', headers: { 'x-api-key': ingestToken } },
        { label: 'the ingest token with a character more', headers: bearer(`${ingestToken}x`) },
        { label: 'the ingest token cut short', headers: bearer(ingestToken.slice(0, -1)) },
        { label: 'the ingest token as Basic', headers: { authorization: `Basic ${ingestToken}` } },
      ];
      const req = validRequest(ep, { account: victim });
      let n = 0;
      for (const cred of wrong) {
        await expectRefused(apis[n % 2]!, req, cred);
        n += 1;
      }
      record('credentials', endpointName(ep), n);
    });
  }

  it("leaves the victim's key and profile untouched by all of it", async () => {
    const doc = await apis[0].deps.mongo.collections.apiKeys.findOne({ _id: victim.userId });
    expect(doc?.hash, 'key neither rotated nor revoked').to.equal(keyHashBefore);
    const me = await call(apis[1].url, 'GET', '/api/auth/me', { headers: bearer(victim.apiKey) });
    expect(me.status).to.equal(200);
    expect(me.body.user.id).to.equal(victim.userId);
  });
});
