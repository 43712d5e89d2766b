import { expect } from 'chai';
import { encodeCursor } from '#shared/cursor.js';
import type { EventRecord } from '#shared/eventlog/types.js';
import type { Logger } from '#shared/log.js';
import { DeadlineWheel } from '../../live/held.js';
import { openFeed, type FeedPorts } from '../../live/feed.js';
import { WaiterRegistry, type LiveEvent } from '../../live/waiters.js';
import type { StreamSlots } from './slots.js';
import type { SseWriter } from './sse.js';
import { LiveStream, type StreamEnd } from './stream.js';

const ACCOUNT = 'acct_stream_test';

function liveEvent(offset: bigint): LiveEvent {
  const position = { partition: 0, offset };
  return { position, record: { id: `evt_${offset}`, type: 'call.started', created_at: '', data: {}, cursor: encodeCursor(position) } };
}

/** An SSE writer that records what it is asked to write; `hold` makes the next event write wait until released. */
class FakeSse {
  closed = false;
  readonly written: string[] = [];
  private held: (() => void) | null = null;
  holdNext = false;

  resumePoint(cursor: string): Promise<void> {
    this.written.push(`resume ${cursor}`);
    return Promise.resolve();
  }

  heartbeat(): Promise<void> {
    this.written.push('heartbeat');
    return Promise.resolve();
  }

  event(record: EventRecord): Promise<void> {
    this.written.push(`event ${record.id}`);
    if (!this.holdNext) return Promise.resolve();
    this.holdNext = false;
    return new Promise((resolve) => (this.held = resolve));
  }

  release(): void {
    this.held?.();
  }
}

const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

async function openStream(timing: { durationMs: number; heartbeatMs: number }) {
  const registry = new WaiterRegistry();
  let dispatched = 0n;
  const ports: FeedPorts = {
    registry,
    position: () => dispatched,
    partitionOf: () => 0,
    waitForWatermark: () => Promise.resolve(true),
    readRange: () => Promise.resolve([]),
    nothingAfter: () => true,
    handoffTimeoutMs: 1000,
  };
  const feed = await openFeed(ports, { accountId: ACCOUNT, types: null, since: null, pageSize: 10, maxQueue: { events: 100, bytes: 1 << 20 } });
  const sse = new FakeSse();
  const deadlines = new DeadlineWheel(5);
  const ends: StreamEnd[] = [];
  const slots = { renew: () => Promise.resolve(true) } as unknown as StreamSlots;
  const log = { warn: () => undefined } as unknown as Logger;
  const parts = { slots, lease: { slotId: 's', leaseId: 'l', accountId: ACCOUNT }, timing, deadlines, log };
  const stream = new LiveStream(feed, sse as unknown as SseWriter, parts, { ended: (why) => ends.push(why) });
  const dispatch = (): void => {
    registry.dispatch(ACCOUNT, liveEvent(dispatched));
    dispatched += 1n;
  };
  return { stream, sse, deadlines, ends, dispatch };
}

describe('live SSE stream (parked between writes)', () => {
  it('writes an event queued while it was writing the one before, without waiting for a heartbeat', async () => {
    const { stream, sse, ends, dispatch } = await openStream({ durationMs: 60_000, heartbeatMs: 60_000 });
    stream.start();
    await settle();
    sse.holdNext = true;
    dispatch(); // written, and its write held
    await settle();
    dispatch(); // queued while the pump is busy: its wake-up finds the pump running
    await settle();
    expect(sse.written.filter((w) => w.startsWith('event'))).to.deep.equal(['event evt_0']);
    sse.release();
    await settle();
    expect(sse.written.filter((w) => w.startsWith('event'))).to.deep.equal(['event evt_0', 'event evt_1']);
    expect(ends).to.deep.equal([]);
    stream.clientGone();
    await settle();
    expect(ends).to.deep.equal(['client']);
  });

  it('waits on the deadline wheel, not a timer of its own, and ends at its duration with a resume point', async () => {
    const { stream, sse, deadlines, ends, dispatch } = await openStream({ durationMs: 60, heartbeatMs: 10_000 });
    dispatch(); // before start: a position to resume from
    stream.start();
    await settle();
    expect(deadlines.size).to.equal(1);
    await sleep(150);
    expect(ends).to.deep.equal(['duration']);
    expect(sse.written.at(-1)).to.match(/^resume /);
    expect(deadlines.size).to.equal(0);
  });

  it('leaves the wheel when its client goes', async () => {
    const { stream, deadlines, ends } = await openStream({ durationMs: 60_000, heartbeatMs: 60_000 });
    stream.start();
    await settle();
    expect(deadlines.size).to.equal(1);
    stream.clientGone();
    await settle();
    expect(ends).to.deep.equal(['client']);
    expect(deadlines.size).to.equal(0);
  });
});
