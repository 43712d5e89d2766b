import { expect } from 'chai';
import { DeadlineWheel, type Expiring } from './deadlines.js';

class Item implements Expiring {
  expiredAt: number | null = null;
  expire(): void {
    this.expiredAt = Date.now();
  }
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe('deadline wheel', () => {
  it('expires every item of a bucket on one timer, never before its deadline', async () => {
    const wheel = new DeadlineWheel(50);
    const deadline = Date.now() + 60;
    const items = Array.from({ length: 100 }, () => new Item());
    for (const item of items) wheel.add(item, deadline);
    expect(wheel.size).to.equal(100);
    expect(wheel.timers).to.equal(1);
    await sleep(200);
    expect(items.every((i) => i.expiredAt !== null && i.expiredAt >= deadline)).to.equal(true);
    expect(wheel.size).to.equal(0);
    expect(wheel.timers).to.equal(0);
  });

  it('forgets a removed item, and a bucket left empty takes its timer with it', async () => {
    const wheel = new DeadlineWheel(10);
    const kept = new Item();
    const dropped = new Item();
    const alone = new Item();
    const deadline = Date.now() + 30;
    const shared = wheel.add(kept, deadline);
    expect(wheel.add(dropped, deadline)).to.equal(shared);
    const own = wheel.add(alone, deadline + 1000);
    expect(wheel.timers).to.equal(2);
    wheel.remove(dropped, shared);
    wheel.remove(alone, own);
    wheel.remove(alone, own); // twice: no-op
    expect(wheel.timers).to.equal(1);
    expect(wheel.size).to.equal(1);
    await sleep(100);
    expect(kept.expiredAt).to.not.equal(null);
    expect(dropped.expiredAt).to.equal(null);
    expect(alone.expiredAt).to.equal(null);
    expect(wheel.timers).to.equal(0);
  });
});
