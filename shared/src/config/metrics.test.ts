import { expect } from 'chai';
import { loadMetricsConfig } from './metrics.js';

describe('metrics config', () => {
  it('leaves /metrics open without METRICS_TOKEN, in production too', () => {
    expect(loadMetricsConfig({ NODE_ENV: 'production' }).token).to.equal(null);
  });

  it('takes a token of 16+ characters and refuses a short or spaced one', () => {
    expect(loadMetricsConfig({ METRICS_TOKEN: 'x'.repeat(16) }).token).to.equal('x'.repeat(16));
    expect(() => loadMetricsConfig({ METRICS_TOKEN: 'short' })).to.throw(/METRICS_TOKEN/);
    expect(() => loadMetricsConfig({ METRICS_TOKEN: 'has a space in it ok' })).to.throw(/METRICS_TOKEN/);
  });
});
