/**
 * SSRF at subscription time: createWebhook (the function behind
 * POST /api/v1/webhooks and the MCP tool) with production rules, the real
 * database and a fake DNS. Every hostile URL is refused with a reason and
 * nothing is stored.
 */
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { AppError } from '#shared/errors/index.js';
import { FakeDns } from '#test-support/fake-dns.js';
import { createWebhook, listWebhooks, type WebhookDeps } from '../src/features/webhooks/service.js';
import { sharedApis, testApiConfig } from './support/api.js';

const HOSTILE: [string, RegExp][] = [
  ['http://hooks.example.com/in', /must use https/],
  ['ftp://hooks.example.com/in', /must use https/],
  ['https://user:pass@hooks.example.com/in', /credentials/],
  ['https://token@hooks.example.com/in', /credentials/],
  ['https://127.0.0.1/in', /loopback/],
  ['https://127.0.0.2:8443/in', /loopback/],
  ['https://[::1]/in', /loopback/],
  ['https://[::ffff:127.0.0.1]/in', /loopback/],
  ['https://[::ffff:7f00:1]/in', /loopback/],
  ['https://2130706433/in', /loopback/],
  ['https://0x7f000001/in', /loopback/],
  ['https://017700000001/in', /loopback/],
  ['https://0177.0.0.1/in', /loopback/],
  ['https://127.1/in', /loopback/],
  ['https://10.0.0.1/in', /private/],
  ['https://172.16.0.1/in', /private/],
  ['https://172.31.255.254/in', /private/],
  ['https://192.168.1.1/in', /private/],
  ['https://[fd00::1]/in', /private/],
  ['https://169.254.169.254/latest/meta-data/', /link-local/],
  ['https://[fe80::1]/in', /link-local/],
  ['https://100.64.0.1/in', /carrier-grade NAT/],
  ['https://0.0.0.0/in', /unspecified/],
  ['https://[::]/in', /unspecified/],
  ['https://224.0.0.1/in', /multicast/],
  ['https://255.255.255.255/in', /broadcast/],
  ['https://192.0.2.1/in', /documentation/],
  ['https://240.0.0.1/in', /reserved/],
  ['https://[64:ff9b::a9fe:a9fe]/in', /link-local/],
  ['https://[2002:a00:1::]/in', /private/],
  ['https://localhost/in', /local or internal name/],
  ['https://LocalHost./in', /local or internal name/],
  ['https://app.localhost/in', /local or internal name/],
  ['https://metadata.google.internal/computeMetadata/v1/', /local or internal name/],
  ['https://nas.local/in', /local or internal name/],
  ['https://intranet/in', /local or internal name/],
  ['https://localhost../in', /local or internal name/],
  ['https://metadata.google.internal.../computeMetadata/v1/', /local or internal name/],
  ['https://127.0.0.1../in', /loopback/],
  ['https://169.254.169.254.../latest/meta-data/', /link-local/],
  ['https://loopback.attacker.example/in', /resolves to a private or internal address/],
  ['https://mixed.attacker.example/in', /resolves to a private or internal address/],
  ['https://v6.attacker.example/in', /resolves to a private or internal address/],
  ['https://hooks.example.com:8080/in', /port 8080 is not allowed/],
  ['https://hooks.example.com:25/in', /port 25 is not allowed/],
  ['https://93.184.216.34:6379/in', /port 6379 is not allowed/],
  ['https://nxdomain.attacker.example/in', /does not resolve/],
];

describe('webhook SSRF protection at creation', () => {
  let deps: WebhookDeps;
  const dns = new FakeDns()
    .set('hooks.example.com', ['93.184.216.34'])
    .set('loopback.attacker.example', ['127.0.0.1'])
    .set('mixed.attacker.example', ['93.184.216.34', '10.9.8.7'])
    .set('v6.attacker.example', ['::ffff:169.254.169.254']);

  before(async () => {
    const [a] = await sharedApis();
    // Production rules (no private targets), the real database, a DNS the test controls.
    deps = { ...a.deps, config: testApiConfig({ WEBHOOK_ALLOW_PRIVATE_TARGETS: 'false' }), resolveHost: dns.resolve };
    expect(deps.config.webhooks.allowPrivateTargets).to.equal(false);
  });

  it(`refuses all ${HOSTILE.length} hostile URLs with 400 naming the reason, storing nothing`, async () => {
    expect(HOSTILE.length).to.be.at.least(25);
    const account = 'acct_' + randomBytes(8).toString('hex');
    for (const [url, reason] of HOSTILE) {
      let error: unknown;
      try {
        await createWebhook(deps, account, { url, events: ['*'] });
      } catch (err) {
        error = err;
      }
      expect(error, url).to.be.instanceOf(AppError);
      const e = error as AppError;
      expect(e.status, url).to.equal(400);
      expect(e.details?.[0]?.path, url).to.equal('url');
      expect(e.message, url).to.match(reason);
      // Which rule, never which inside address a name resolved to.
      if (url.includes('attacker.example')) expect(JSON.stringify([e.message, e.details]), url).to.not.match(/127\.0\.0\.1|10\.9\.8\.7|169\.254/);
    }
    expect((await listWebhooks(deps, account)).webhooks).to.have.length(0);
  });

  it('accepts a public https name and stores its canonical URL', async () => {
    const account = 'acct_' + randomBytes(8).toString('hex');
    const created = await createWebhook(deps, account, { url: 'https://HOOKS.example.com:443/in', events: ['call.started'] });
    expect(created.url).to.equal('https://hooks.example.com/in');
    expect(dns.lookups).to.include('hooks.example.com');
  });

  it('accepts 8443 and a port listed in WEBHOOK_ALLOWED_PORTS', async () => {
    const account = 'acct_' + randomBytes(8).toString('hex');
    const listed = { ...deps, config: testApiConfig({ WEBHOOK_ALLOW_PRIVATE_TARGETS: 'false', WEBHOOK_ALLOWED_PORTS: '9443,10000-10100' }) };
    expect((await createWebhook(listed, account, { url: 'https://hooks.example.com:8443/in', events: ['*'] })).url).to.equal('https://hooks.example.com:8443/in');
    expect((await createWebhook(listed, account, { url: 'https://hooks.example.com:10042/in', events: ['*'] })).url).to.equal('https://hooks.example.com:10042/in');
    let error: AppError | undefined;
    try {
      await createWebhook(listed, account, { url: 'https://hooks.example.com:10101/in', events: ['*'] });
    } catch (err) {
      error = err as AppError;
    }
    expect(error?.status).to.equal(400);
    expect(error?.message).to.match(/port 10101 is not allowed/);
  });

  it('answers 503 (not 400) when DNS cannot answer right now', async () => {
    const flaky = { ...deps, resolveHost: async () => Promise.reject(Object.assign(new Error('EAI_AGAIN'), { code: 'EAI_AGAIN' })) };
    let error: AppError | undefined;
    try {
      await createWebhook(flaky, 'acct_x', { url: 'https://hooks.example.com/in', events: ['*'] });
    } catch (err) {
      error = err as AppError;
    }
    expect(error?.status).to.equal(503);
    expect(error?.headers['Retry-After']).to.be.a('string');
  });
});
