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
