import { expect } from 'chai';
import { classify, percentile } from './service.js';

describe('activity: attempt classes and percentiles', () => {
  it('counts a 2xx as succeeded, a failure with a next attempt as retrying, the last failure as failed', () => {
    expect(classify({ outcome: 'ok', next_attempt_at: null })).to.equal('succeeded');
    expect(classify({ outcome: 'http_5xx', next_attempt_at: new Date() })).to.equal('retrying');
    expect(classify({ outcome: 'timeout', next_attempt_at: null })).to.equal('failed');
  });

  it('takes nearest-rank percentiles, null for none', () => {
    expect(percentile([], 50)).to.equal(null);
    expect(percentile([7], 50)).to.equal(7);
    expect(percentile([7], 99)).to.equal(7);
    const hundred = Array.from({ length: 100 }, (_, i) => i + 1);
    expect(percentile(hundred, 50)).to.equal(50);
    expect(percentile(hundred, 99)).to.equal(99);
    expect(percentile([10, 20, 30, 40, 5000], 50)).to.equal(30);
    expect(percentile([10, 20, 30, 40, 5000], 99)).to.equal(5000);
  });
});
