import { expect } from 'chai';
import { decodeCursor, encodeCursor } from '#shared/cursor.js';
import type { EventType } from '#shared/eventlog/types.js';
import { openFeed, type FeedPorts, type RangeQuery } from './feed.js';
import { RecentAccounts } from './recent-accounts.js';
import { TailWindow } from './tail-window.js';
import { Waiter, WaiterRegistry, type LiveEvent } from './waiters.js';

/**
 * An in-memory log of one partition: `append` puts an event in the log; the
 * fan-out and the materializer each advance on command, so every interleaving
 * of the handoff can be staged.
 */
class FakeLog {
  readonly registry = new WaiterRegistry();
  readonly log: { account: string; type: EventType; offset: bigint }[] = [];
  dispatched = 0n; // fan-out position P
  materialized = -1n; // watermark
  watermarkReachable = true;
  /** The fan-out's index of accounts seen; null = the port never vouches (every resume reads). */
  recent: RecentAccounts | null = new RecentAccounts(1000);
  reads = 0;
  /** The fan-out's tail window; null = none (every replay reads the store). */
  tail: TailWindow | null = null;

  constructor() {
    this.recent?.reset(0, 0n);
  }

  append(account: string, type: EventType = 'call.started'): bigint {
    const offset = BigInt(this.log.length);
    this.log.push({ account, type, offset });
    return offset;
  }

  event(i: bigint): LiveEvent {
    const e = this.log[Number(i)]!;
    const position = { partition: 0, offset: e.offset };
    return { position, record: { id: `evt_${e.offset}`, type: e.type, created_at: '', data: {}, cursor: encodeCursor(position) } };
  }

  fanOut(): void {
    while (this.dispatched < BigInt(this.log.length)) {
      const e = this.log[Number(this.dispatched)]!;
      this.recent?.note(0, e.account, e.offset);
      this.tail?.append(e.account, this.event(e.offset));
      this.registry.dispatch(e.account, this.event(e.offset));
      this.dispatched += 1n;
    }
  }

  materialize(): void {
    this.materialized = BigInt(this.log.length) - 1n;
  }

  ports(): FeedPorts {
    return {
      registry: this.registry,
      position: () => this.dispatched,
      partitionOf: () => 0,
      waitForWatermark: async (_p, offset, timeoutMs) => {
        const deadline = Date.now() + timeoutMs;
        while (Date.now() < deadline) {
          if (this.watermarkReachable && this.materialized >= offset) return true;
          await new Promise((resolve) => setTimeout(resolve, 2));
        }
        return false;
      },
      readRange: async (q: RangeQuery) => {
        this.reads += 1;
        return this.log
          .filter((e) => e.account === q.accountId && e.offset > q.after && e.offset < q.before && e.offset <= this.materialized && (!q.types || q.types.includes(e.type)))
          .slice(0, q.limit)
          .map((e) => this.event(e.offset));
      },
      nothingAfter: (partition, accountId, after) => this.recent?.nothingAfter(partition, accountId, after) ?? false,
      readWindow: (q) => this.tail?.read({ ...q, before: q.before }) ?? null,
      windowCovers: (partition, after, before) => this.tail?.covers(partition, after, before) ?? false,
      handoffTimeoutMs: 200,
    };
  }
}

async function drain(feed: { next(ms: number): Promise<LiveEvent | null> }): Promise<bigint[]> {
  const out: bigint[] = [];
  for (;;) {
    const e = await feed.next(5);
    if (!e) return out;
    out.push(e.position.offset);
  }
}

const since = (offset: bigint) => decodeCursor(encodeCursor({ partition: 0, offset }));

describe('Feed (the resume handoff)', () => {
  it('replays stored events after the cursor, then live ones, each once', async () => {
    const f = new FakeLog();
    for (let i = 0; i < 5; i++) f.append('a');
    f.append('b');
    f.fanOut();
    f.materialize();
    const feed = await openFeed(f.ports(), { accountId: 'a', types: null, since: since(1n), pageSize: 2, maxQueue: { events: 100, bytes: 1e9 } });
    f.append('a');
    f.append('b');
    f.append('a');
    f.fanOut();
    expect(await drain(feed)).to.deep.equal([2n, 3n, 4n, 6n, 8n]);
    feed.close();
    expect(f.registry.size).to.equal(0);
  });

  it('waits for the materializer to reach P before reading, so no event between is skipped', async () => {
    const f = new FakeLog();
    f.append('a');
    f.fanOut();
    f.materialize();
    f.append('a'); // 1: dispatched but not yet in MongoDB
    f.append('a'); // 2
    f.fanOut();
    const opening = openFeed(f.ports(), { accountId: 'a', types: null, since: since(0n), pageSize: 10, maxQueue: { events: 100, bytes: 1e9 } });
    setTimeout(() => f.materialize(), 30);
    const feed = await opening;
    f.append('a');
    f.fanOut();
    expect(await drain(feed)).to.deep.equal([1n, 2n, 3n]);
  });

  it('answers 503 instead of serving a gap when the materializer does not catch up', async () => {
    const f = new FakeLog();
    f.append('a');
    f.append('a');
    f.fanOut();
    f.watermarkReachable = false;
    const err = await openFeed(f.ports(), { accountId: 'a', types: null, since: since(0n), pageSize: 10, maxQueue: { events: 100, bytes: 1e9 } }).catch((e: unknown) => e);
    expect(err).to.have.property('status', 503);
    expect(f.registry.size).to.equal(0);
  });

  it('resumes without reading MongoDB or waiting for it when the fan-out saw nothing of the account after the cursor', async () => {
    const f = new FakeLog();
    f.append('a'); // 0: the reader's last event
    for (let i = 0; i < 5; i++) f.append('b');
    f.fanOut();
    f.watermarkReachable = false; // a wait for the materializer would end in 503
    const feed = await openFeed(f.ports(), { accountId: 'a', types: null, since: since(0n), pageSize: 10, maxQueue: { events: 100, bytes: 1e9 } });
    f.append('a');
    f.fanOut();
    expect(await drain(feed)).to.deep.equal([6n]);
    expect(f.reads).to.equal(0);
  });

  it('reads MongoDB when the fan-out saw an event of the account after the cursor, or forgot what it saw there', async () => {
    for (const forget of [false, true]) {
      const f = new FakeLog();
      f.recent = new RecentAccounts(2);
      f.recent.reset(0, 0n);
      f.append('a'); // 0
      f.append(forget ? 'b' : 'a'); // 1
      f.append('c');
      f.append('d'); // 'a' (or 'b') forgotten: only two accounts are kept
      f.fanOut();
      f.materialize();
      const feed = await openFeed(f.ports(), { accountId: 'a', types: null, since: since(0n), pageSize: 10, maxQueue: { events: 100, bytes: 1e9 } });
      expect(await drain(feed)).to.deep.equal(forget ? [] : [1n]);
      expect(f.reads, forget ? 'forgotten' : 'seen').to.equal(1);
    }
  });

  it('skips live events at or before a cursor that is ahead of this process', async () => {
    const f = new FakeLog();
    f.append('a');
    f.fanOut();
    f.materialize();
    f.append('a'); // 1, 2: already seen by the client on a faster process
    f.append('a');
    const feed = await openFeed(f.ports(), { accountId: 'a', types: null, since: since(2n), pageSize: 10, maxQueue: { events: 100, bytes: 1e9 } });
    f.append('a');
    f.fanOut();
    expect(await drain(feed)).to.deep.equal([3n]);
  });

  it('without a cursor takes only events after it registered', async () => {
    const f = new FakeLog();
    f.append('a');
    f.fanOut();
    const feed = await openFeed(f.ports(), { accountId: 'a', types: null, since: null, pageSize: 10, maxQueue: { events: 100, bytes: 1e9 } });
    f.append('b');
    f.append('a');
    f.fanOut();
    expect(await drain(feed)).to.deep.equal([2n]);
    expect(decodeCursor(feed.checkedCursor()!).offset).to.equal(2n);
  });

  it('filters by type in the replay and live, and reports how far it checked', async () => {
    const f = new FakeLog();
    f.append('a', 'call.started');
    f.append('a', 'message.sent');
    f.fanOut();
    f.materialize();
    const feed = await openFeed(f.ports(), { accountId: 'a', types: ['message.sent'], since: since(0n), pageSize: 10, maxQueue: { events: 100, bytes: 1e9 } });
    f.append('a', 'call.ended');
    f.append('a', 'message.sent');
    f.append('a', 'call.ended');
    f.fanOut();
    expect(await drain(feed)).to.deep.equal([1n, 3n]);
    expect(decodeCursor(feed.checkedCursor()!).offset).to.equal(4n);
  });

  it('closes a feed whose reader falls too far behind (it resumes by cursor instead)', async () => {
    const f = new FakeLog();
    const feed = await openFeed(f.ports(), { accountId: 'a', types: null, since: null, pageSize: 10, maxQueue: { events: 2, bytes: 1e9 } });
    for (let i = 0; i < 3; i++) f.append('a');
    f.fanOut();
    expect(feed.closedBy).to.equal('overflow');
    expect(await drain(feed)).to.deep.equal([0n, 1n]);
  });

  it('a feed closed by overflow reports the last event it handed over, never the one it dropped', async () => {
    const f = new FakeLog();
    const feed = await openFeed(f.ports(), { accountId: 'a', types: null, since: null, pageSize: 10, maxQueue: { events: 2, bytes: 1e9 } });
    for (let i = 0; i < 4; i++) f.append('a');
    f.fanOut(); // 0 and 1 queued, 2 overflows, 3 comes after the close
    expect(feed.closedBy).to.equal('overflow');
    expect(await drain(feed)).to.deep.equal([0n, 1n]);
    expect(decodeCursor(feed.checkedCursor()!).offset, 'resuming here reads 2 and 3').to.equal(1n);
  });

  it('a waiter overflowing on bytes keeps its resume point below the dropped event', async () => {
    const f = new FakeLog();
    const waiter = new Waiter('a', null, -1n, { events: 100, bytes: 100 });
    for (let i = 0; i < 3; i++) waiter.offer({ ...f.event(f.append('a')), size: 40 });
    expect(waiter.closedBy).to.equal('overflow');
    await waiter.next(0);
    await waiter.next(0);
    expect(waiter.deliveredThrough).to.equal(1n);
  });

  it('also bounds what a slow reader holds in bytes', async () => {
    const f = new FakeLog();
    const waiter = new Waiter('a', null, -1n, { events: 100, bytes: 100 });
    for (let i = 0; i < 3; i++) waiter.offer({ ...f.event(f.append('a')), size: 40 });
    expect(waiter.closedBy).to.equal('overflow');
    expect((await waiter.next(0))?.position.offset).to.equal(0n);
    expect((await waiter.next(0))?.position.offset).to.equal(1n);
    expect(await waiter.next(0)).to.equal(null);
  });

  it('ends waits at once on shutdown and refuses new ones', async () => {
    const f = new FakeLog();
    const feed = await openFeed(f.ports(), { accountId: 'a', types: null, since: null, pageSize: 10, maxQueue: { events: 2, bytes: 1e9 } });
    const pending = feed.next(10_000);
    f.registry.closeAll('shutdown');
    expect(await pending).to.equal(null);
    expect(feed.closedBy).to.equal('shutdown');
    const later = await openFeed(f.ports(), { accountId: 'a', types: null, since: null, pageSize: 10, maxQueue: { events: 2, bytes: 1e9 } });
    expect(later.closedBy).to.equal('shutdown');
  });

  it('ends a wait when its signal aborts', async () => {
    const f = new FakeLog();
    const feed = await openFeed(f.ports(), { accountId: 'a', types: null, since: null, pageSize: 10, maxQueue: { events: 2, bytes: 1e9 } });
    const ac = new AbortController();
    const pending = feed.next(10_000, ac.signal);
    ac.abort();
    expect(await pending).to.equal(null);
  });

  it('a waiter closed by shutdown reports only what it saw, never events dispatched after it closed', async () => {
    const f = new FakeLog();
    f.append('a'); // 0
    f.fanOut();
    f.materialize();
    const feed = await openFeed(f.ports(), { accountId: 'a', types: null, since: null, pageSize: 1, maxQueue: { events: 16, bytes: 1e9 } });
    f.registry.closeAll('shutdown');
    f.append('a'); // 1, 2: ingested during the shutdown, dispatched to nobody here
    f.append('b');
    f.fanOut();
    expect(await feed.next(10)).to.equal(null);
    // A client looping on this cursor (on another process) must still get offset 1.
    expect(decodeCursor(feed.checkedCursor()!).offset).to.equal(0n);
  });

  it('a resume point never passes an event still queued or still to be read from MongoDB', async () => {
    const f = new FakeLog();
    for (let i = 0; i < 3; i++) f.append('a'); // 0, 1, 2
    f.fanOut();
    f.materialize();
    const feed = await openFeed(f.ports(), { accountId: 'a', types: null, since: since(0n), pageSize: 10, maxQueue: { events: 16, bytes: 1e9 } });
    expect(decodeCursor(feed.checkedCursor()!).offset, 'nothing read yet: the cursor it came with').to.equal(0n);
    expect((await feed.next(5))?.position.offset).to.equal(1n);
    expect(decodeCursor(feed.checkedCursor()!).offset, 'one stored event taken, the next one read but not taken').to.equal(1n);
    expect((await feed.next(5))?.position.offset).to.equal(2n);
    f.append('b'); // 3
    f.append('a'); // 4: queued, not taken
    f.append('b'); // 5
    f.fanOut();
    expect(decodeCursor(feed.checkedCursor()!).offset, 'an event queued: just before it').to.equal(3n);
    expect((await feed.next(5))?.position.offset).to.equal(4n);
    expect(decodeCursor(feed.checkedCursor()!).offset, 'all taken: the fan-out position').to.equal(5n);
  });

  describe('with a tail window', () => {
    const withWindow = (events: number): FakeLog => {
      const log = new FakeLog();
      log.recent = null; // every resume must replay: the window is what is tested
      log.tail = new TailWindow({ events, bytes: 1e9 });
      log.tail.reset(0, 0n);
      return log;
    };

    it('replays a covered cursor from memory: no wait for the materializer, no MongoDB read, then live', async () => {
      const log = withWindow(100);
      for (let i = 0; i < 6; i++) log.append(i % 2 ? 'b' : 'a', i === 4 ? 'call.ended' : 'call.started');
      log.fanOut(); // the materializer never runs
      const feed = await openFeed(log.ports(), { accountId: 'a', types: null, since: since(0n), pageSize: 1, maxQueue: { events: 100, bytes: 1e9 } });
      log.append('a');
      log.fanOut();
      expect(await drain(feed)).to.deep.equal([2n, 4n, 6n]);
      expect(log.reads).to.equal(0);
      const typed = await openFeed(log.ports(), { accountId: 'a', types: ['call.ended'], since: since(0n), pageSize: 200, maxQueue: { events: 100, bytes: 1e9 } });
      expect(await drain(typed)).to.deep.equal([4n]);
      expect(typed.checkedCursor()).to.equal(encodeCursor({ partition: 0, offset: 6n }));
    });

    it('reads the store, after the watermark wait, for a cursor older than the window', async () => {
      const log = withWindow(2);
      for (let i = 0; i < 6; i++) log.append('a');
      log.fanOut(); // the window holds 4 and 5
      const opening = openFeed(log.ports(), { accountId: 'a', types: null, since: since(1n), pageSize: 200, maxQueue: { events: 100, bytes: 1e9 } });
      await new Promise((resolve) => setTimeout(resolve, 20));
      log.materialize();
      expect(await drain(await opening)).to.deep.equal([2n, 3n, 4n, 5n]);
      expect(log.reads).to.equal(1);
      // Just inside: the event after the cursor is the window's first.
      const inside = await openFeed(log.ports(), { accountId: 'a', types: null, since: since(3n), pageSize: 200, maxQueue: { events: 100, bytes: 1e9 } });
      expect(await drain(inside)).to.deep.equal([4n, 5n]);
      expect(log.reads).to.equal(1);
    });

    it('a window that evicts past the cursor mid-replay sends the rest to the store, never a gap', async () => {
      const log = withWindow(5);
      for (let i = 0; i < 5; i++) log.append('a');
      log.fanOut();
      const feed = await openFeed(log.ports(), { accountId: 'a', types: null, since: since(0n), pageSize: 1, maxQueue: { events: 100, bytes: 1e9 } });
      expect((await feed.next(5))!.position.offset).to.equal(1n); // from the window
      for (let i = 0; i < 4; i++) log.append('b');
      log.fanOut(); // the window now holds 4..8: offsets 2 and 3 are gone from memory
      const rest = feed.next(200);
      await new Promise((resolve) => setTimeout(resolve, 20));
      expect(log.reads, 'waits for the materializer first').to.equal(0);
      log.materialize();
      const got = [(await rest)!.position.offset, ...(await drain(feed))];
      expect(got).to.deep.equal([2n, 3n, 4n]);
    });
  });
});
