import { expect } from 'chai';
import { Batcher, BatchTimeoutError } from './batcher.js';

async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected a rejection');
}

function recorder(opts: { lingerMs?: number; maxItems?: number; maxBytes?: number; fail?: (items: number[]) => boolean } = {}) {
  const sends: number[][] = [];
  let release: (() => void) | null = null;
  let hold = false;
  const batcher = new Batcher<number, string>({
    lingerMs: opts.lingerMs ?? 5,
    maxItems: opts.maxItems ?? 100,
    maxBytes: opts.maxBytes ?? 1_000_000,
    sizeOf: (n) => n,
    send: async (items) => {
      sends.push(items);
      if (hold) await new Promise<void>((resolve) => (release = resolve));
      if (opts.fail?.(items)) throw new Error('broker said no');
      return items.map((n) => `ok:${n}`);
    },
  });
  return { batcher, sends, holdNext: () => (hold = true), release: () => { hold = false; release?.(); } };
}

describe('Batcher', () => {
  it('coalesces concurrent submissions into one send and answers each in order', async () => {
    const { batcher, sends } = recorder();
    const [a, b, c] = await Promise.all([batcher.submit([1, 2]), batcher.submit([3]), batcher.submit([4, 5, 6])]);
    expect(sends).to.deep.equal([[1, 2, 3, 4, 5, 6]]);
    expect(a).to.deep.equal(['ok:1', 'ok:2']);
    expect(b).to.deep.equal(['ok:3']);
    expect(c).to.deep.equal(['ok:4', 'ok:5', 'ok:6']);
  });

  it('sends at once when maxItems is reached and splits a large submission in order', async () => {
    const { batcher, sends } = recorder({ lingerMs: 10_000, maxItems: 3 });
    const result = await batcher.submit([1, 2, 3, 4, 5, 6, 7]);
    expect(result).to.deep.equal([1, 2, 3, 4, 5, 6, 7].map((n) => `ok:${n}`));
    expect(sends).to.deep.equal([[1, 2, 3], [4, 5, 6], [7]]);
  });

  it('keeps each send under maxBytes (but never sends nothing)', async () => {
    const { batcher, sends } = recorder({ lingerMs: 0, maxBytes: 10 });
    await batcher.submit([4, 4, 4, 20, 1]);
    expect(sends).to.deep.equal([[4, 4], [4], [20], [1]]);
  });

  it('has one send in flight at a time and sends what queued meanwhile right after', async () => {
    const r = recorder({ lingerMs: 1 });
    r.holdNext();
    const first = r.batcher.submit([1]);
    await new Promise((resolve) => setTimeout(resolve, 20));
    const second = r.batcher.submit([2]);
    const third = r.batcher.submit([3]);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(r.sends).to.deep.equal([[1]]);
    r.release();
    expect(await Promise.all([first, second, third])).to.deep.equal([['ok:1'], ['ok:2'], ['ok:3']]);
    expect(r.sends).to.deep.equal([[1], [2, 3]]);
  });

  it('with lingerMs 0, sends the first item at once (no timer) and batches what arrives while that send is in flight', async () => {
    const r = recorder({ lingerMs: 0 });
    r.holdNext();
    const first = r.batcher.submit([1]);
    expect(r.sends, 'sent in the same tick').to.deep.equal([[1]]);
    const second = r.batcher.submit([2]);
    const third = r.batcher.submit([3, 4]);
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(r.sends).to.deep.equal([[1]]);
    r.release();
    expect(await Promise.all([first, second, third])).to.deep.equal([['ok:1'], ['ok:2'], ['ok:3', 'ok:4']]);
    expect(r.sends).to.deep.equal([[1], [2, 3, 4]]);
  });

  it('rejects every submission of a failed send and keeps working afterwards', async () => {
    const { batcher } = recorder({ fail: (items) => items.includes(13) });
    const results = await Promise.allSettled([batcher.submit([12]), batcher.submit([13])]);
    expect(results.map((r) => r.status)).to.deep.equal(['rejected', 'rejected']);
    expect(await batcher.submit([14])).to.deep.equal(['ok:14']);
  });

  it('flush() sends everything queued and waits for it', async () => {
    const { batcher, sends } = recorder({ lingerMs: 10_000 });
    const pending = batcher.submit([1, 2]);
    await batcher.flush();
    expect(sends).to.deep.equal([[1, 2]]);
    expect(await pending).to.deep.equal(['ok:1', 'ok:2']);
  });

  it('an aborted submission is withdrawn from the queue and rejected; the others are still sent', async () => {
    const r = recorder({ lingerMs: 1 });
    r.holdNext();
    const stuck = r.batcher.submit([1]); // in flight, held
    await new Promise((resolve) => setTimeout(resolve, 20));
    const abort = new AbortController();
    const refused = r.batcher.submit([2, 3], abort.signal);
    const kept = r.batcher.submit([4]);
    abort.abort(new Error('too late'));
    expect((await rejection(refused)).message).to.equal('too late');
    expect(r.batcher.pending, 'only the kept item is queued').to.equal(1);
    r.release();
    expect(await stuck).to.deep.equal(['ok:1']);
    expect(await kept).to.deep.equal(['ok:4']);
    expect(r.sends, 'the withdrawn items were never sent').to.deep.equal([[1], [4]]);
  });

  it('a submission aborted while in flight rejects at once, whatever the send does later', async () => {
    const r = recorder({ lingerMs: 1 });
    r.holdNext();
    const abort = new AbortController();
    const inFlight = r.batcher.submit([1], abort.signal);
    await new Promise((resolve) => setTimeout(resolve, 20));
    abort.abort(new Error('timed out'));
    expect((await rejection(inFlight)).message).to.equal('timed out');
    r.release();
    expect(await r.batcher.submit([2]), 'the batcher keeps working').to.deep.equal(['ok:2']);
    expect(r.sends).to.deep.equal([[1], [2]]);
  });

  it('a submission not sent within timeoutMs is withdrawn and rejected with BatchTimeoutError; the batcher keeps working', async () => {
    const r = recorder({ lingerMs: 1 });
    r.holdNext();
    const stuck = r.batcher.submit([1], undefined, 10); // in flight, held past its timeout
    await new Promise((resolve) => setTimeout(resolve, 5));
    const queued = r.batcher.submit([2], undefined, 10); // queued behind it, never sent
    const [late, sent] = await Promise.all([rejection(queued), rejection(stuck)]);
    expect(late).to.be.instanceOf(BatchTimeoutError);
    expect(sent).to.be.instanceOf(BatchTimeoutError);
    expect(r.batcher.pending, 'the timed-out item left the queue').to.equal(0);
    r.release();
    expect(await r.batcher.submit([3], undefined, 1000)).to.deep.equal(['ok:3']);
    expect(r.sends).to.deep.equal([[1], [3]]);
  });

  it('refuses at once with a signal that has already aborted', async () => {
    const { batcher, sends } = recorder();
    expect((await rejection(batcher.submit([1], AbortSignal.abort(new Error('gone'))))).message).to.equal('gone');
    await batcher.flush();
    expect(sends).to.deep.equal([]);
  });
});
