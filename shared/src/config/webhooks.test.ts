import { expect } from 'chai';
import { loadWebhookConfig } from './webhooks.js';

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

  it('refuses the development key in production even when set explicitly', () => {
    const devKey = Buffer.from('dev-only-webhook-key-change-me!!').toString('base64');
    expect(() => loadWebhookConfig({ NODE_ENV: 'production', WEBHOOK_SECRET_KEY: devKey }, true)).to.throw(/WEBHOOK_SECRET_KEY is the public development default/);
  });
});
