import { expect } from 'chai';
import { Admission, SLOW_START } from './admission.js';

/** Takes what admission hands out now, as `subscription:item` strings. */
function takeAll<T>(a: Admission<T>): string[] {
  const out: string[] = [];
  for (let next = a.next().admitted; next; next = a.next().admitted) out.push(`${next.key}:${next.item}`);
  return out;
}

describe('admission: which waiting delivery takes the next slot', () => {
  it('shares slots round-robin per subscription, within the process concurrency', () => {
    const a = new Admission<string>({ concurrency: 3, perSubscription: 8 });
    for (const i of ['1', '2', '3']) a.push('a', i);
    a.push('b', '1');
    expect(takeAll(a)).to.deep.equal(['a:1', 'b:1', 'a:2']);
    expect(a.inFlight).to.equal(3);
    expect(a.freeSlots).to.equal(0);
    a.release('a');
    expect(takeAll(a)).to.deep.equal(['a:3']);
  });

  it('starts a new subscription slowly, one more at once per attempt that went well', () => {
    const a = new Admission<number>({ concurrency: 100, perSubscription: 8 });
    for (let i = 0; i < 20; i++) a.push('s', i);
    let taken = 0;
    while (a.next().admitted) taken++;
    expect(taken).to.equal(SLOW_START);
    a.observe('s', 'ok');
    a.release('s');
    // One freed and one more allowed: two more go.
    expect(takeAll(a)).to.have.length(2);
  });

  it('cuts a subscription whose attempts time out and hands back what no longer fits its waiting room', () => {
    const a = new Admission<number>({ concurrency: 100, perSubscription: 4 });
    for (let i = 0; i < 16; i++) a.push('hung', i);
    while (a.next().admitted);
    expect(a.isSlowed('hung')).to.equal(false);
    const back = a.observe('hung', 'timeout');
    expect(a.isSlowed('hung')).to.equal(true);
    expect(back.length).to.be.above(0);
    expect(a.waiting).to.equal(16 - 4 - back.length);
    // Other outcomes cut nothing.
    expect(a.observe('other', 'http_error')).to.deep.equal([]);
    expect(a.isSlowed('other')).to.equal(false);
  });

  it('passes over a rate-limited subscription without a token and says when its next one is due', () => {
    let now = 0;
    const a = new Admission<string>({ concurrency: 10, perSubscription: 10 }, () => now);
    a.setRate('slow', 1); // one a second, a burst of one
    a.push('slow', '1');
    a.push('slow', '2');
    a.push('free', '1');
    const first = a.next().admitted;
    expect(first).to.include({ key: 'slow', item: '1', gated: true });
    expect(a.next().admitted).to.include({ key: 'free', item: '1', gated: false });
    const none = a.next();
    expect(none.admitted).to.equal(null);
    expect(none.wakeIn).to.equal(1000);
    now = 1000;
    expect(a.next().admitted).to.include({ key: 'slow', item: '2' });
    // Its waiting room holds a few seconds of its rate; then it is throttled.
    expect(a.isLimited('slow')).to.equal(true);
    expect(a.roomFor('slow')).to.equal(5);
    expect(a.paceOf('slow')).to.equal(1);
  });

  it('makes an ungated item wait for its token once its read shows a limit', () => {
    let now = 0;
    const a = new Admission<string>({ concurrency: 10, perSubscription: 10 }, () => now);
    a.push('s', '1');
    a.push('s', '2');
    const [one, two] = [a.next().admitted!, a.next().admitted!];
    expect([one.gated, two.gated]).to.deep.equal([false, false]);
    expect(a.tokenAfterRead('s', 2, one.gated)).to.equal(0);
    expect(a.tokenAfterRead('s', 2, two.gated)).to.equal(500);
    now = 500;
    expect(a.tokenAfterRead('s', 2, two.gated)).to.equal(0);
    // Unlimited: never waits.
    expect(a.tokenAfterRead('u', null, false)).to.equal(0);
  });

  it('tells a stall: attempts running and none started or finished for a while', () => {
    let now = 0;
    const a = new Admission<string>({ concurrency: 10, perSubscription: 10 }, () => now);
    a.push('s', '1');
    a.next();
    now = 999;
    expect(a.isStalled('s', 1000)).to.equal(false);
    now = 1000;
    expect(a.isStalled('s', 1000)).to.equal(true);
    a.release('s');
    expect(a.isStalled('s', 1000)).to.equal(false);
  });

  it('drains what waits', () => {
    const a = new Admission<string>({ concurrency: 1, perSubscription: 4 });
    a.push('a', '1');
    a.push('a', '2');
    a.next();
    expect(a.drain()).to.deep.equal(['2']);
    expect(a.waiting).to.equal(0);
  });
});
