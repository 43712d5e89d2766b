import { expect } from 'chai';
import { FairQueue } from './fair-queue.js';

describe('fair queue', () => {
  it('serves keys round-robin and caps how many of one key run at once', () => {
    const q = new FairQueue<string>(2, 10);
    for (const item of ['a1', 'a2', 'a3', 'a4']) q.push('a', item);
    q.push('b', 'b1');
    q.push('c', 'c1');
    const order = [q.take(), q.take(), q.take(), q.take(), q.take()].map((t) => t?.item ?? null);
    // a runs at most two; b and c are not stuck behind a's backlog.
    expect(order).to.deep.equal(['a1', 'b1', 'c1', 'a2', null]);
    // a runs at its cap but may still queue more: its due work is still worth claiming.
    expect(q.roomOf('a')).to.be.above(0);
    q.done('a');
    expect(q.take()?.item).to.equal('a3');
    expect(q.size).to.equal(1);
  });

  it('refuses items past the per-key waiting cap and drains what waits', () => {
    const q = new FairQueue<number>(1, 2);
    expect([q.push('k', 1), q.push('k', 2), q.push('k', 3), q.push('j', 4)]).to.deep.equal([true, true, false, true]);
    expect(q.drain().sort()).to.deep.equal([1, 2, 4]);
    expect(q.size).to.equal(0);
    expect(q.take()).to.equal(null);
  });

  it("halves a key's cap for each attempt that hung or could not connect, and raises it one by one as attempts succeed", () => {
    const q = new FairQueue<string>(32, 1000);
    for (let i = 0; i < 40; i++) q.push('hung', `h${i}`);
    for (const slow of [true, true, true, true, true, true]) q.observe('hung', slow);
    expect(q.capOf('hung')).to.equal(1);
    expect(q.take()?.item).to.equal('h0');
    expect(q.take()).to.equal(null); // its one slot is taken: the rest wait, other keys' slots stay free
    q.done('hung');
    for (let i = 0; i < 40; i++) q.observe('hung', false);
    expect(q.capOf('hung')).to.equal(32);
    expect(q.capOf('never-seen')).to.equal(32);
  });

  it('keeps the waiting room in step with the cap: a hung key holds a few items, the rest goes back', () => {
    const q = new FairQueue<number>(32, 128);
    for (let i = 0; i < 128; i++) expect(q.push('hung', i)).to.equal(true);
    expect(q.push('hung', 128)).to.equal(false);
    for (let i = 0; i < 6; i++) q.observe('hung', true);
    expect(q.capOf('hung')).to.equal(1);
    expect(q.queueLimitOf('hung')).to.equal(4);
    const extra = q.trim('hung');
    expect(extra).to.have.length(124);
    expect(q.size).to.equal(4);
    expect(q.push('hung', 999)).to.equal(false);
    expect(q.take()?.item).to.equal(0);
    expect(q.push('hung', 999)).to.equal(true);
    expect(q.roomOf('hung'), 'slowed down: its waiting room is full again, its due work stays in the store').to.equal(0);
    expect(q.push('ok', 1)).to.equal(true); // other keys keep their whole room
    expect(q.queueLimitOf('ok')).to.equal(128);
  });

  it('lets a new key start with a few attempts and ramps it up one per success, without counting it as slowed', () => {
    const q = new FairQueue<number>(32, 128, 4);
    for (let i = 0; i < 100; i++) q.push('new', i);
    const started = [];
    for (let t = q.take(); t; t = q.take()) started.push(t.item);
    expect(started).to.have.length(4);
    expect(q.capOf('new')).to.equal(32); // not a cut: its work is not handed to the store
    expect(q.roomOf('new')).to.equal(128 - 96);
    q.done('new');
    q.observe('new', false);
    let more = 0;
    while (q.take()) more++;
    expect(more).to.equal(2); // one slot freed, one more allowed
    for (let i = 0; i < 40; i++) q.observe('new', false);
    for (let i = 0; i < 6; i++) q.done('new');
    while (q.take()) more++;
    expect(more).to.equal(2 + 32);
  });
});
