import { EventEmitter } from 'node:events';
import type { ServerResponse } from 'node:http';
import { expect } from 'chai';
import type { Context } from 'koa';
import { AppError } from '#shared/errors/index.js';
import { DeadlineWheel, HeldReaders, LongPollCap, type HeldReader } from './held.js';

class Item implements HeldReader {
  expiredAt: number | null = null;
  gone = 0;
  expire(): void {
    this.expiredAt = Date.now();
  }
  clientGone(): void {
    this.gone += 1;
  }
}

/** A response that records what is written to it: 'close' is an event, as on Node's. */
class FakeResponse extends EventEmitter {
  destroyed = false;
  writableEnded = false;
  headersSent = false;
  statusCode = 200;
  headers: Record<string, unknown> = {};
  body: string | null = null;
  setHeader(name: string, value: unknown): void {
    this.headers[name.toLowerCase()] = value;
  }
  end(body: string): void {
    this.body = body;
    this.writableEnded = true;
  }
}

function fakeCtx(res: FakeResponse): Context {
  return { state: {}, status: 404, respond: true, res: res as unknown as ServerResponse } as unknown as Context;
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

describe('long-poll cap', () => {
  it('holds up to the cap per account, refuses the next with 429 and Retry-After, and a release frees one slot', () => {
    const cap = new LongPollCap(2);
    cap.hold('acct_a');
    cap.hold('acct_a');
    cap.hold('acct_b'); // another account has its own slots
    let refused: unknown;
    try {
      cap.hold('acct_a');
    } catch (err) {
      refused = err;
    }
    expect(refused).to.be.instanceOf(AppError);
    expect((refused as AppError).status).to.equal(429);
    expect((refused as AppError).headers).to.include({ 'Retry-After': '1' });
    expect(cap.held('acct_a')).to.equal(2);
    cap.release('acct_a');
    expect(cap.held('acct_a')).to.equal(1);
    cap.hold('acct_a');
    cap.release('acct_a');
    cap.release('acct_a');
    cap.release('acct_a'); // more releases than holds: never below zero
    expect(cap.held('acct_a')).to.equal(0);
    expect(cap.held('acct_b')).to.equal(1);
  });
});

describe('parked responses and client-gone', () => {
  const held = (): HeldReaders => new HeldReaders({ deadlineResolutionMs: 25, maxLongPollsPerAccount: 10 });

  it('tells the reader once its client leaves, and no more once the response has ended', () => {
    const readers = held();
    const res = new FakeResponse();
    const ctx = fakeCtx(res);
    const reader = new Item();
    const parked = readers.park(ctx);
    expect(ctx.respond).to.equal(false);
    readers.watch(parked, reader);
    res.emit('close');
    expect(reader.gone).to.equal(1);
    parked.end(200);
    res.emit('close');
    expect(reader.gone).to.equal(1);
    expect(res.listenerCount('close')).to.equal(0);
  });

  it('does not watch a response that has already ended (a reader that answered at once)', () => {
    const readers = held();
    const res = new FakeResponse();
    const parked = readers.park(fakeCtx(res));
    parked.answer({ event: null });
    const reader = new Item();
    readers.watch(parked, reader);
    expect(res.listenerCount('close')).to.equal(0);
    res.emit('close');
    expect(reader.gone).to.equal(0);
  });

  it('tells a reader whose client left before it was watched at once', () => {
    const readers = held();
    const res = new FakeResponse();
    res.destroyed = true;
    const reader = new Item();
    readers.watch(readers.park(fakeCtx(res)), reader);
    expect(reader.gone).to.equal(1);
  });

  it('writes an answer as JSON with its length, runs the hooks once, and writes nothing to a client that has gone', () => {
    const readers = held();
    const res = new FakeResponse();
    const parked = readers.park(fakeCtx(res));
    const seen: number[] = [];
    parked.whenDone((s) => seen.push(s));
    parked.answer({ event: null, timed_out: true, cursor: 'c' });
    parked.answer({ event: 'again' });
    expect(res.body).to.equal('{"event":null,"timed_out":true,"cursor":"c"}');
    expect(res.headers).to.deep.equal({ 'content-type': 'application/json; charset=utf-8', 'content-length': res.body!.length });
    expect(seen).to.deep.equal([200]);
    const gone = new FakeResponse();
    gone.destroyed = true;
    readers.park(fakeCtx(gone)).answer({ event: null });
    expect(gone.body).to.equal(null);
  });
});
