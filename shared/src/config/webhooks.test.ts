import { expect } from 'chai';
import { loadWebhookConfig } from './webhooks.js';

/** Explicit development mode: the tests of other settings need no secret key. */
const DEV = { NODE_ENV: 'development' };

describe('webhook config', () => {
  const key = Buffer.alloc(32, 1).toString('base64');

  it('has a development key (NODE_ENV=development only) and private targets off by default', () => {
    const c = loadWebhookConfig({ NODE_ENV: 'development' }, false);
    expect(c.secretKey).to.have.length(32);
    expect(c.allowPrivateTargets).to.equal(false);
  });

  it('requires WEBHOOK_SECRET_KEY outside development mode and checks its size', () => {
    expect(() => loadWebhookConfig({}, true)).to.throw(/WEBHOOK_SECRET_KEY is required/);
    expect(() => loadWebhookConfig({ NODE_ENV: 'test' }, false)).to.throw(/WEBHOOK_SECRET_KEY is required/);
    expect(() => loadWebhookConfig({}, false)).to.throw(/WEBHOOK_SECRET_KEY is required/);
    expect(() => loadWebhookConfig({ WEBHOOK_SECRET_KEY: 'c2hvcnQ=' }, true)).to.throw(/exactly 32 bytes/);
    expect(loadWebhookConfig({ WEBHOOK_SECRET_KEY: key }, true).secretKey.equals(Buffer.alloc(32, 1))).to.equal(true);
  });

  it('refuses the private-targets development setting in production', () => {
    expect(loadWebhookConfig({ NODE_ENV: 'development', WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' }, false).allowPrivateTargets).to.equal(true);
    expect(() => loadWebhookConfig({ WEBHOOK_SECRET_KEY: key, WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' }, true)).to.throw(
      /WEBHOOK_ALLOW_PRIVATE_TARGETS .* refused when NODE_ENV=production/,
    );
  });

  it('allows 443 and 8443 only unless WEBHOOK_ALLOWED_PORTS lists more, and names a bad entry', () => {
    expect(loadWebhookConfig(DEV, false).allowedPorts).to.deep.equal([]);
    expect(loadWebhookConfig({ ...DEV, WEBHOOK_ALLOWED_PORTS: '9443, 10000-10100' }, false).allowedPorts).to.deep.equal([
      [9443, 9443],
      [10000, 10100],
    ]);
    for (const bad of ['0', '70000', 'http', '10-5', '443;444']) {
      expect(() => loadWebhookConfig({ ...DEV, WEBHOOK_ALLOWED_PORTS: bad }, false), bad).to.throw(/WEBHOOK_ALLOWED_PORTS has a bad entry/);
    }
  });

  it('resolves with the system DNS servers unless DNS_SERVERS says otherwise', () => {
    const d = loadWebhookConfig(DEV, false).dns;
    expect(d).to.include({ servers: null, timeoutMs: 5000, maxLookupsPerAccount: 8, maxTtlS: 300 });
    const c = loadWebhookConfig({ ...DEV, DNS_SERVERS: '127.0.0.1:5353, 1.1.1.1, ::1, [::1]:5353', DNS_TIMEOUT_MS: '2000', DNS_MAX_LOOKUPS_PER_ACCOUNT: '3', DNS_MAX_TTL_S: '60' }, false).dns;
    expect(c).to.include({ timeoutMs: 2000, maxLookupsPerAccount: 3, maxTtlS: 60 });
    expect(c.servers).to.deep.equal(['127.0.0.1:5353', '1.1.1.1', '::1', '[::1]:5353']);
    for (const bad of ['dns.google', '127.0.0.1:99999', '1.2.3:53', ',']) {
      expect(() => loadWebhookConfig({ ...DEV, DNS_SERVERS: bad }, false), bad).to.throw(/DNS_SERVERS/);
    }
    expect(() => loadWebhookConfig({ ...DEV, DNS_TIMEOUT_MS: '0' }, false)).to.throw(/DNS_TIMEOUT_MS/);
  });

  it('refuses the development key in production even when set explicitly', () => {
    const devKey = Buffer.from('dev-only-webhook-key-change-me!!').toString('base64');
    expect(() => loadWebhookConfig({ NODE_ENV: 'production', WEBHOOK_SECRET_KEY: devKey }, true)).to.throw(/WEBHOOK_SECRET_KEY is the public development default/);
  });
});
