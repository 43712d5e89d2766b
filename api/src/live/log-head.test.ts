import { expect } from 'chai';
import { LogHead, type Offsets } from './log-head.js';

/** A head source whose requests the test answers one by one; `end` is the log's end when a request is sent. */
function source() {
  const sent: { end: bigint; answer: () => void; fail: () => void }[] = [];
  const state = { end: 0n };
  const fetch = (): Promise<Offsets> =>
    new Promise((resolve, reject) => {
      const end = state.end;
      sent.push({ end, answer: () => resolve(new Map([[0, end]])), fail: () => reject(new Error('no answer')) });
    });
  return { sent, state, fetch };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('LogHead (the end of the log, asked afresh)', () => {
  it('answers a reader only from a request sent after it asked: one arriving during a request waits for the next', async () => {
    const s = source();
    const head = new LogHead(s.fetch);
    s.state.end = 5n;
    const first = head.latest();
    s.state.end = 6n; // acknowledged after the first request was sent
    const second = head.latest();
    const third = head.latest();
    expect(s.sent).to.have.length(1);
    s.sent[0]!.answer();
    expect((await first).get(0)).to.equal(5n);
    await tick();
    expect(s.sent, 'the readers that came meanwhile share one new request').to.have.length(2);
    s.sent[1]!.answer();
    expect((await second).get(0)).to.equal(6n);
    expect(await third).to.equal(await second);
  });

  it('a failed request fails its readers, and the next reader sends a new one', async () => {
    const s = source();
    const head = new LogHead(s.fetch);
    const first = head.latest();
    const waiting = head.latest();
    s.sent[0]!.fail();
    expect(await first.catch((e: Error) => e.message)).to.equal('no answer');
    await tick();
    s.state.end = 3n;
    s.sent[1]!.answer();
    expect((await waiting).get(0), 'the queued request is still sent').to.equal(0n);
    await tick();
    const later = head.latest();
    expect(s.sent).to.have.length(3);
    s.sent[2]!.answer();
    expect((await later).get(0)).to.equal(3n);
  });
});
