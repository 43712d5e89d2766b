import { expect } from 'chai';
import { FairQueue } from './fair-queue.js';
import { RateLimiter } from './rate-limit.js';

describe('rate limits: token buckets per subscription', () => {
  it('spaces a limited key by 1/rate after its first token, and leaves others alone', () => {
    let now = 0;
    const limiter = new RateLimiter(() => now);
    limiter.set('a', 5);
    expect(limiter.waitOf('a')).to.equal(0);
    limiter.take('a');
    expect(limiter.waitOf('a')).to.equal(200);
    now = 100;
    expect(limiter.waitOf('a')).to.equal(100);
    now = 200;
    expect(limiter.waitOf('a')).to.equal(0);
    expect(limiter.waitOf('b')).to.equal(0);
    expect(limiter.rateOf('b')).to.equal(null);
  });

  it('bursts a tenth of a second at most after a pause; a new limit applies at once; null removes it', () => {
    let now = 0;
    const limiter = new RateLimiter(() => now);
    limiter.set('a', 1000);
    now = 60_000;
    let sent = 0;
    while (limiter.waitOf('a') === 0) {
      limiter.take('a');
      sent++;
    }
    expect(sent).to.equal(100);
    limiter.set('a', 2);
    expect(limiter.waitOf('a')).to.be.within(1, 500);
    limiter.set('a', null);
    expect(limiter.waitOf('a')).to.equal(0);
    expect(limiter.rateOf('a')).to.equal(null);
  });

  it('the fair queue passes over a key that is not ready, keeping its items in order', () => {
    const q = new FairQueue<string>(4, 16);
    for (const i of [1, 2, 3]) q.push('limited', `l${i}`);
    for (const i of [1, 2]) q.push('free', `f${i}`);
    const blocked = new Set(['limited']);
    const ready = (key: string) => !blocked.has(key);
    expect(q.take(ready)?.item).to.equal('f1');
    expect(q.take(ready)?.item).to.equal('f2');
    expect(q.take(ready)).to.equal(null);
    blocked.clear();
    expect([q.take(ready)?.item, q.take(ready)?.item, q.take(ready)?.item]).to.deep.equal(['l1', 'l2', 'l3']);
  });
});
