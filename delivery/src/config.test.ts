import { expect } from 'chai';
import { loadDeliveryConfig } from './config.js';

describe('delivery config: metrics', () => {
  it('serves metrics on 127.0.0.1:9464 every 15 s by default, without a token', () => {
    expect(loadDeliveryConfig({ NODE_ENV: 'development' }).metrics).to.deep.equal({ token: null, host: '127.0.0.1', port: 9464, sampleIntervalMs: 15_000 });
  });

  it('binds to HOST, turns the server off with METRICS_PORT=0 and refuses a bad port', () => {
    const config = loadDeliveryConfig({ NODE_ENV: 'development', HOST: '0.0.0.0', METRICS_PORT: '0', METRICS_TOKEN: 'a-long-enough-token' });
    expect(config.metrics).to.include({ host: '0.0.0.0', port: 0, token: 'a-long-enough-token' });
    expect(() => loadDeliveryConfig({ NODE_ENV: 'development', METRICS_PORT: '70000' })).to.throw(/METRICS_PORT/);
    expect(() => loadDeliveryConfig({ NODE_ENV: 'development', METRICS_SAMPLE_INTERVAL_MS: '5' })).to.throw(/METRICS_SAMPLE_INTERVAL_MS/);
  });
});

describe('delivery config: WEBHOOK_DISABLE_AFTER', () => {
  const disableAfter = (v?: string) => loadDeliveryConfig({ NODE_ENV: 'development', ...(v === undefined ? {} : { WEBHOOK_DISABLE_AFTER: v }) }).webhooks.disableAfterMs;

  it('defaults to 5 days, reads ms/s/m/h/d and "off"', () => {
    expect(disableAfter()).to.equal(5 * 24 * 3600 * 1000);
    expect(disableAfter('2s')).to.equal(2000);
    expect(disableAfter('90m')).to.equal(90 * 60_000);
    expect(disableAfter('7d')).to.equal(7 * 24 * 3600 * 1000);
    expect(disableAfter('off')).to.equal(null);
  });

  it('refuses a bad or out-of-range duration, naming the variable', () => {
    for (const bad of ['5', '5 days', '-1d', '500ms', '366d']) expect(() => disableAfter(bad), bad).to.throw(/WEBHOOK_DISABLE_AFTER/);
  });
});
