import { expect } from 'chai';
import { parseMetrics, sampleValue } from '#test-support/prometheus.js';
import { createApiMetrics } from './metrics.js';

describe('materializer_lag_events', () => {
  it('is the log end seen minus the watermark, per partition, read at scrape time', async () => {
    const metrics = createApiMetrics();
    const watermarks = new Map([
      [0, 4n],
      [1, -1n],
    ]);
    metrics.watchMaterializer({
      partitions: () => [0, 1],
      endOffset: (p) => (p === 0 ? 10n : 3n),
      refreshWatermark: async () => undefined,
      knownWatermark: (p) => watermarks.get(p)!,
    });
    let samples = parseMetrics(await metrics.registry.metrics());
    expect(sampleValue(samples, 'materializer_lag_events', { partition: '0' })).to.equal(5); // offsets 5..9
    expect(sampleValue(samples, 'materializer_lag_events', { partition: '1' })).to.equal(3); // nothing materialized yet
    watermarks.set(0, 9n);
    samples = parseMetrics(await metrics.registry.metrics());
    expect(sampleValue(samples, 'materializer_lag_events', { partition: '0' })).to.equal(0);
  });

  it('falls back to the last known watermark when MongoDB does not answer, without failing the scrape', async () => {
    const metrics = createApiMetrics();
    metrics.watchMaterializer({
      partitions: () => [0],
      endOffset: () => 100n,
      refreshWatermark: () => Promise.reject(new Error('mongo down')),
      knownWatermark: () => 49n,
    });
    const samples = parseMetrics(await metrics.registry.metrics());
    expect(sampleValue(samples, 'materializer_lag_events', { partition: '0' })).to.equal(50);
  });
});
