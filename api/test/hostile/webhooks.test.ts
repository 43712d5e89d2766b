/**
 * Hostile input to webhook subscriptions: any URL (internal targets in every
 * spelling, odd schemes, userinfo, unicode hosts, huge ports) and unicode
 * edge cases in descriptions.
 */
import { expect } from 'chai';
import fc from 'fast-check';
import type { RunningApi } from '../../src/server.js';
import { bearer, createAccount, type TestAccount } from '../support/accounts.js';
import { call, sharedApis } from '../support/api.js';
import { NASTY_STRINGS, nastyString } from './support/arbitraries.js';
import { fuzz } from './support/fuzz.js';
import { answer, describeRequest } from './support/http.js';
import { assertSafe } from './support/oracle.js';
import { record } from './support/tally.js';
import { dropHostileWebhooks, ownsWebhooks } from './support/webhook-cleanup.js';

/** Spellings of loopback, private, link-local and metadata addresses. */
const INTERNAL_HOSTS = [
  '127.0.0.1', '127.1', '2130706433', '0x7f000001', '017700000001', '0.0.0.0', '0', 'localhost', 'LOCALHOST.', 'foo.localhost',
  '[::1]', '[::]', '[::ffff:127.0.0.1]', '[::ffff:7f00:1]', '[0:0:0:0:0:ffff:127.0.0.1]', '[fe80::1]', '[fc00::1]',
  '10.0.0.1', '172.16.0.1', '192.168.1.1', '169.254.169.254', '100.64.0.1', '224.0.0.1', '255.255.255.255',
  '[64:ff9b::a9fe:a9fe]', '[2002:7f00:1::]', 'metadata.google.internal',
];

describe('hostile: webhook subscriptions', function () {
  this.timeout(120_000);
  let apis: [RunningApi, RunningApi];
  let acct: TestAccount;

  before(async () => {
    apis = await sharedApis();
    acct = await createAccount(apis[0].url);
    ownsWebhooks(acct.userId);
  });

  after(async () => {
    await dropHostileWebhooks(apis[0]);
  });

  /** Deletes what a case created, so the per-account cap never decides an answer. */
  async function cleanUp(id: unknown): Promise<void> {
    if (typeof id === 'string') await call(apis[0].url, 'DELETE', `/api/v1/webhooks/${id}`, { headers: bearer(acct.apiKey) });
  }

  it('never subscribes an internal address, however it is spelled', async () => {
    const url = fc.tuple(fc.constantFrom('https', 'http', 'HTTPS'), fc.constantFrom('', 'user:pass@', 'x@'), fc.constantFrom(...INTERNAL_HOSTS), fc.constantFrom('', ':443', ':8443', ':0', ':65535'), fc.webPath()).map(([scheme, auth, host, port, path]) => `${scheme}://${auth}${host}${port}${path}`);
    await fuzz('webhook internal URLs', 100, url, async (u) => {
      const req = { method: 'POST', path: '/api/v1/webhooks', headers: bearer(acct.apiKey), body: JSON.stringify({ url: u, events: ['*'] }) };
      const res = await answer(apis[0].url, req);
      await cleanUp(res.json?.id);
      assertSafe(res, describeRequest(req));
      expect(res.status, `${u} -> ${res.text.slice(0, 200)}`).to.equal(400);
    });
  });

  it('answers any URL and description safely', async () => {
    const url = fc.oneof(
      fc.webUrl({ withQueryParameters: true, withFragments: true }),
      fc.webUrl({ authoritySettings: { withIPv4: true, withIPv6: true, withIPv4Extended: true, withUserInfo: true, withPort: true } }),
      nastyString(),
      fc.constantFrom('javascript:alert(1)', 'data:text/plain,x', 'file:///etc/passwd', 'ftp://1.1.1.1/', 'https://', 'https://1.1.1.1:99999/', 'https://xn--nxasmq6b.com/', 'https://例え.テスト/', 'https://1.1.1.1/' + 'a'.repeat(3000), 'HTTPS://1.1.1.1\\@127.0.0.1/', 'https://1.1.1.1%2f@127.0.0.1/', 'https://[::ffff:1.1.1.1]/'),
    );
    await fuzz('webhook URLs and descriptions', 100, fc.tuple(url, nastyString()), async ([u, description]) => {
      const req = { method: 'POST', path: '/api/v1/webhooks', headers: bearer(acct.apiKey), body: JSON.stringify({ url: u, events: ['*'], description }) };
      const res = await answer(apis[0].url, req);
      await cleanUp(res.json?.id);
      assertSafe(res, describeRequest(req));
    });
  });

  it('stores unicode descriptions exactly and reads them back the same on either process', async () => {
    const descriptions = NASTY_STRINGS.filter((s) => [...s].length <= 500 && !/[\uD800-\uDFFF]/u.test(s));
    const roundTrip = async (description: string): Promise<void> => {
      const created = await call(apis[0].url, 'POST', '/api/v1/webhooks', { headers: bearer(acct.apiKey), body: { url: 'https://1.1.1.1/hook', events: ['*'], description } });
      expect(created.status, `${JSON.stringify(description).slice(0, 60)}: ${JSON.stringify(created.body)}`).to.equal(201);
      const read = await call(apis[1].url, 'GET', `/api/v1/webhooks/${created.body.id}`, { headers: bearer(acct.apiKey) });
      expect(read.body.description, JSON.stringify(description).slice(0, 60)).to.equal(description);
      await cleanUp(created.body.id);
    };
    for (let i = 0; i < descriptions.length; i += 4) await Promise.all(descriptions.slice(i, i + 4).map(roundTrip));
    const lone = await call(apis[0].url, 'POST', '/api/v1/webhooks', { headers: bearer(acct.apiKey), raw: '{"url":"https://1.1.1.1/","events":["*"],"description":"a\\ud800"}' });
    expect(lone.status).to.equal(400);
    expect(lone.body.error.details[0].path).to.equal('description');
    record('limits', 'unicode descriptions round-tripped', descriptions.length + 1);
  });
});
