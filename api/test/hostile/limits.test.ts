/**
 * Size and shape limits: oversized and compressed bodies, deep nesting,
 * floods of unknown fields, unicode edge cases in names. Each answer is the
 * documented 4xx, quickly, and what is stored is what was sent.
 */
import { expect } from 'chai';
import fc from 'fast-check';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import type { RunningApi } from '../../src/server.js';
import { MAX_DETAILS } from '../../src/validation.js';
import { bearer, createAccount } from '../support/accounts.js';
import { sharedApis } from '../support/api.js';
import { NASTY_STRINGS } from './support/arbitraries.js';
import { credentialOf, ENDPOINTS, endpointName, pathOf, type Endpoint, type Fixture } from './support/endpoints.js';
import { answer, type HostileAnswer } from './support/http.js';
import { assertSafe } from './support/oracle.js';
import { record } from './support/tally.js';
import { dropHostileWebhooks, ownsWebhooks } from './support/webhook-cleanup.js';

const MB = 1024 * 1024;
const jsonPosts = ENDPOINTS.filter((ep) => ep.method === 'POST' && !ep.nonJson);

function expectError(res: HostileAnswer, status: number, code: string, what: string, ep?: Endpoint): void {
  assertSafe(res, what, { jsonRpc: ep?.jsonRpc });
  expect(res.status, `${what}: ${res.text.slice(0, 200)}`).to.equal(status);
  // JSON-RPC errors (MCP) carry the house code in error.data.
  expect(ep?.jsonRpc ? res.json.error.data.code : res.json.error.code, what).to.equal(code);
}

describe('hostile: sizes, nesting and unicode', function () {
  this.timeout(120_000);
  let apis: [RunningApi, RunningApi];
  let f: Fixture;

  before(async () => {
    apis = await sharedApis();
    f = { account: await createAccount(apis[0].url) };
    ownsWebhooks(f.account.userId);
  });

  after(async () => {
    await dropHostileWebhooks(apis[0]);
  });

  const post = (ep: Endpoint, body: string | Buffer, headers: Record<string, string> = {}): Promise<HostileAnswer> =>
    answer(apis[0].url, { method: 'POST', path: pathOf(ep, f), body, headers: { ...credentialOf(ep, f, apis[0].deps.config.ingestToken), 'content-type': 'application/json', ...headers } });

  it('refuses a body over the limit with 413 on every JSON endpoint: declared, chunked, or inflated from gzip', async () => {
    // 50 MB of zeros in 50 KB of gzip: the limit counts inflated bytes.
    const bomb = gzipSync(Buffer.from(`{"pad":"${'0'.repeat(50 * MB)}"}`));
    let n = 0;
    for (const ep of jsonPosts) {
      const limit = ep.bodyLimitBytes ?? MB;
      const over = JSON.stringify({ pad: 'x'.repeat(limit + 16) });
      expectError(await post(ep, over), 413, 'payload_too_large', `${endpointName(ep)} declared`, ep);
      // No Content-Length: the limit must hold while streaming.
      const chunked = new Blob([over]).stream();
      const headers = { ...credentialOf(ep, f, apis[0].deps.config.ingestToken), 'content-type': 'application/json' };
      const res = await fetch(apis[0].url + pathOf(ep, f), { method: 'POST', body: chunked, duplex: 'half', headers } as RequestInit);
      const text = await res.text();
      expectError({ status: res.status, headers: res.headers, text, json: JSON.parse(text) }, 413, 'payload_too_large', `${endpointName(ep)} chunked`, ep);
      // MCP refuses compressed bodies outright (415); everyone else inflates and counts.
      const bombed = await post(ep, bomb, { 'content-encoding': 'gzip' });
      if (ep.jsonRpc) expectError(bombed, 415, 'unsupported_media_type', `${endpointName(ep)} gzip bomb`, ep);
      else expectError(bombed, 413, 'payload_too_large', `${endpointName(ep)} gzip bomb`);
      n += 3;
    }
    record('limits', 'oversized bodies', n);
  });

  it('answers a body that does not match its Content-Encoding with 400, an unknown encoding with 415', async () => {
    const [signup] = jsonPosts;
    const body = Buffer.from('{"email":"x"}');
    for (const encoding of ['gzip', 'deflate', 'br']) {
      expectError(await post(signup!, body, { 'content-encoding': encoding }), 400, 'bad_request', `plain body sent as ${encoding}`);
    }
    expectError(await post(signup!, body, { 'content-encoding': 'zstd' }), 415, 'unsupported_media_type', 'zstd');
    // Correctly compressed bodies are read (and validated) like plain ones.
    for (const [encoding, bytes] of [['gzip', gzipSync(body)], ['deflate', deflateSync(body)], ['br', brotliCompressSync(body)]] as const) {
      expectError(await post(signup!, bytes, { 'content-encoding': encoding }), 400, 'validation_failed', `valid ${encoding}`);
    }
    record('limits', 'content encodings', 7);
  });

  it('answers 100,000 to 200,000 levels of nesting, at the top and in every field, on every JSON endpoint without a 5xx', async () => {
    // Both well within the 1 MB limit (2 and 6 bytes a level), so the nesting, not the size, is what is tested.
    const depth = 200_000;
    const arrays = '['.repeat(depth) + ']'.repeat(depth);
    const objects = `${'{"x":'.repeat(depth / 2)}1${'}'.repeat(depth / 2)}`;
    let n = 0;
    for (const ep of jsonPosts) {
      const valid = ep.body ? fc.sample(ep.body(f), { numRuns: 1, seed: 3 })[0]! : {};
      const bodies = [arrays, objects, `{"unknown":${objects}}`];
      // Each known field in turn holds the deep value; the rest of the body stays valid.
      for (const field of ep.bodyFields ?? []) {
        for (const deep of [arrays, objects]) bodies.push(JSON.stringify({ ...valid, [field]: '@@DEEP@@' }).replace('"@@DEEP@@"', deep));
      }
      for (const body of bodies) {
        const res = await post(ep, body);
        assertSafe(res, `${endpointName(ep)} nested ${depth}: ${body.slice(0, 120)}`, { jsonRpc: ep.jsonRpc });
        expect(res.status, `${endpointName(ep)}: the body must be read, not refused for its size`).to.not.equal(413);
        n += 1;
      }
    }
    record('limits', 'deep nesting (100,000-200,000 levels)', n);
  });

  it(`lists at most ${MAX_DETAILS} problems for a body of 80,000 unknown fields`, async () => {
    const body = `{${Array.from({ length: 80_000 }, (_, i) => `"k${i}":0`).join(',')}}`;
    const res = await post(jsonPosts[0]!, body);
    expectError(res, 400, 'validation_failed', '80,000 unknown fields');
    expect(res.json.error.details).to.have.length(MAX_DETAILS);
    expect(res.json.error.message).to.match(/80003 problems, first 50 shown/);
    expect(res.text.length).to.be.below(10_000);
    record('limits', 'unknown-field flood', 1);
  });

  it('stores unicode names exactly as sent (trimmed) and reads them back the same on either process', async () => {
    const names = NASTY_STRINGS.filter((s) => s.trim().length > 0 && [...s.trim()].length <= 200 && !/[\uD800-\uDFFF]/u.test(s));
    for (let i = 0; i < names.length; i += 4) {
      await Promise.all(
        names.slice(i, i + 4).map(async (name) => {
          const acct = await createAccount(apis[0].url, { name, withApiKey: false });
          const me = await answer(apis[1].url, { method: 'GET', path: '/api/auth/me', headers: bearer(acct.token) });
          expect(me.json.user.name, JSON.stringify(name).slice(0, 60)).to.equal(name.trim());
        }),
      );
    }
    record('limits', 'unicode names round-tripped', names.length);
  });

  it('refuses strings with lone surrogates with 400 instead of storing U+FFFD', async () => {
    const [signup] = jsonPosts;
    const cases = ['"\\ud800"', '"a\\udfffb"', '"\\udc00\\ud800"', '"ok\\ud83d"'];
    for (const name of cases) {
      const res = await post(signup!, `{"email":"lone-${Date.now()}-${Math.random()}@example.com","password":"12345678","name":${name}}`);
      expectError(res, 400, 'validation_failed', `name ${name}`);
      expect(res.json.error.details[0].path).to.equal('name');
    }
    // A well-formed pair written as escapes is fine.
    const ok = await post(signup!, `{"email":"pair-${Date.now()}@example.com","password":"12345678","name":"\\ud83d\\ude00"}`);
    expect(ok.status, ok.text).to.equal(201);
    expect(ok.json.user.name).to.equal('😀');
    record('limits', 'lone surrogates', cases.length + 1);
  });
});
