import { expect } from 'chai';
import { encodeCursor } from '#shared/cursor.js';
import { buildEnvelope, encodeEnvelope, peekEnvelopeId, toRecord } from '#shared/eventlog/envelope.js';
import type { EventType } from '#shared/eventlog/types.js';
import { chargedBytes, TailWindow, type TailRead } from './tail-window.js';
import type { LiveEvent } from './waiters.js';

function ev(partition: number, offset: bigint, type: EventType = 'call.started', size = 100): LiveEvent {
  const position = { partition, offset };
  return { position, size, record: { id: `ev_${partition}_${offset}`, type, created_at: '2026-01-01T00:00:00.000Z', data: {}, cursor: encodeCursor(position) } };
}

const q = (accountId: string, after: bigint, more: Partial<TailRead> = {}): TailRead => ({ accountId, partition: 0, after, before: null, types: null, limit: 100, ...more });
const offsets = (events: LiveEvent[] | null): number[] | null => events && events.map((e) => Number(e.position.offset));

describe('TailWindow (recent events per partition, gap-free up to the head)', () => {
  it('answers a covered cursor with the account\'s events after it, oldest first, per account', () => {
    const w = new TailWindow({ events: 100, bytes: 1e9 });
    w.reset(0, 10n);
    w.append('a', ev(0, 10n));
    w.append('b', ev(0, 11n));
    w.append('a', ev(0, 12n));
    w.skip(0, 13n); // not an event
    w.append('a', ev(0, 14n));
    expect(offsets(w.read(q('a', 9n)))).to.deep.equal([10, 12, 14]);
    expect(offsets(w.read(q('a', 10n)))).to.deep.equal([12, 14]);
    expect(offsets(w.read(q('a', 12n)))).to.deep.equal([14]);
    expect(offsets(w.read(q('b', 9n)))).to.deep.equal([11]);
    expect(offsets(w.read(q('c', 9n))), 'an account with nothing in the window').to.deep.equal([]);
    expect(offsets(w.read(q('a', 14n))), 'a cursor at the head').to.deep.equal([]);
    expect(w.read(q('a', 15n)), 'a cursor ahead of the head').to.equal(null);
    expect(w.read(q('a', 8n)), 'offset 9 is not in the window').to.equal(null);
    expect(w.read(q('a', 9n, { partition: 1 })), 'another partition').to.equal(null);
    expect(offsets(w.read(q('a', 9n, { before: 14n }))), 'an upper bound').to.deep.equal([10, 12]);
    expect(w.read(q('a', 9n, { before: 16n })), 'an upper bound past the head').to.equal(null);
    expect(w.covers(0, 9n, 15n)).to.equal(true);
  });

  it('passes over a second copy of an event id (an ingest retry re-produced it), as the store keeps the first', () => {
    const w = new TailWindow({ events: 100, bytes: 1e9 });
    w.reset(0, 10n);
    const first = ev(0, 10n);
    w.append('a', first);
    w.append('a', ev(0, 11n));
    w.append('a', { ...ev(0, 12n), record: { ...first.record, cursor: encodeCursor({ partition: 0, offset: 12n }) } });
    w.append('a', ev(0, 13n));
    expect(offsets(w.read(q('a', 9n)))).to.deep.equal([10, 11, 13]);
    expect(w.covers(0, 9n, 14n), "the copy's offset stays covered").to.equal(true);
  });

  it('filters by type and stops at the limit, like the store read', () => {
    const w = new TailWindow({ events: 100, bytes: 1e9 });
    w.reset(0, 0n);
    const types: EventType[] = ['call.started', 'call.ended', 'call.started', 'message.received', 'call.started'];
    types.forEach((type, i) => w.append('a', ev(0, BigInt(i), type)));
    expect(offsets(w.read(q('a', -1n, { types: ['call.started'] })))).to.deep.equal([0, 2, 4]);
    expect(offsets(w.read(q('a', -1n, { types: ['call.started', 'message.received'], limit: 3 })))).to.deep.equal([0, 2, 3]);
    expect(offsets(w.read(q('a', 0n, { limit: 2 })))).to.deep.equal([1, 2]);
    expect(offsets(w.read(q('a', -1n, { types: ['webhook.ping'] })))).to.deep.equal([]);
  });

  it('evicts the oldest past the event bound and stops covering cursors before it', () => {
    const w = new TailWindow({ events: 3, bytes: 1e9 });
    w.reset(0, 0n);
    for (let i = 0n; i < 5n; i++) w.append(i % 2n ? 'b' : 'a', ev(0, i));
    expect(w.range(0)).to.deep.equal({ start: 2n, next: 5n });
    expect(w.stats()[0]).to.include({ events: 3, accounts: 2 });
    expect(w.read(q('a', 0n)), 'offset 1 was evicted').to.equal(null);
    expect(offsets(w.read(q('a', 1n))), 'just inside').to.deep.equal([2, 4]);
    expect(offsets(w.read(q('b', 1n)))).to.deep.equal([3]);
  });

  it('evicts past the byte bound, charging each event twice its size plus the overhead', () => {
    const per = chargedBytes(100);
    const w = new TailWindow({ events: 1000, bytes: per * 2 + 1 });
    w.reset(0, 0n);
    for (let i = 0n; i < 4n; i++) w.append('a', ev(0, i));
    expect(w.stats()[0]).to.include({ events: 2, bytes: per * 2 });
    expect(w.range(0)).to.deep.equal({ start: 2n, next: 4n });
    w.append('a', ev(0, 4n, 'call.started', per * 10)); // larger than the whole bound: nothing else fits
    expect(w.stats()[0]).to.include({ events: 0, bytes: 0 });
    expect(w.range(0)).to.deep.equal({ start: 5n, next: 5n });
    expect(offsets(w.read(q('a', 4n))), 'a cursor at the head is still covered').to.deep.equal([]);
    expect(w.read(q('a', 3n))).to.equal(null);
  });

  it('an account whose events were all evicted is forgotten', () => {
    const w = new TailWindow({ events: 2, bytes: 1e9 });
    w.reset(0, 0n);
    w.append('a', ev(0, 0n));
    w.append('b', ev(0, 1n));
    w.append('b', ev(0, 2n));
    expect(w.stats()[0]).to.include({ accounts: 1 });
    expect(offsets(w.read(q('a', 0n)))).to.deep.equal([]);
  });

  it('resets at any offset that does not follow the head, never holding a hole', () => {
    const w = new TailWindow({ events: 100, bytes: 1e9 });
    w.reset(0, 0n);
    w.append('a', ev(0, 0n));
    w.append('a', ev(0, 1n));
    w.append('a', ev(0, 5n)); // 2..4 never seen: the window starts again at 5
    expect(w.range(0)).to.deep.equal({ start: 5n, next: 6n });
    expect(w.read(q('a', 1n))).to.equal(null);
    expect(offsets(w.read(q('a', 4n)))).to.deep.equal([5]);
    w.append('a', ev(0, 3n)); // backwards (a seek back): starts again too
    expect(w.range(0)).to.deep.equal({ start: 3n, next: 4n });
    expect(w.read(q('a', 4n)), 'the old head is no longer known').to.equal(null);
    w.skip(0, 9n); // a non-event past a hole
    expect(w.range(0)).to.deep.equal({ start: 10n, next: 10n });
    w.reset(0, 20n); // a gap filled from MongoDB
    expect(w.range(0)).to.deep.equal({ start: 20n, next: 20n });
    expect(w.stats()[0]).to.include({ events: 0, bytes: 0, accounts: 0 });
  });

  it('adopts a partition first seen at its first event', () => {
    const w = new TailWindow({ events: 100, bytes: 1e9 });
    w.append('a', ev(2, 7n));
    expect(w.range(2)).to.deep.equal({ start: 7n, next: 8n });
    expect(offsets(w.read(q('a', 6n, { partition: 2 })))).to.deep.equal([7]);
  });

  it('holds each event once: the reader gets the very object dispatched', () => {
    const w = new TailWindow({ events: 100, bytes: 1e9 });
    const e = ev(0, 0n);
    w.append('a', e);
    expect(w.read(q('a', -1n))![0]).to.equal(e);
  });

  it('keeps its queues compact over a long run (memory does not grow with evictions)', () => {
    const w = new TailWindow({ events: 50, bytes: 1e9 });
    w.reset(0, 0n);
    for (let i = 0n; i < 20_000n; i++) w.append(i % 3n ? 'a' : 'b', ev(0, i));
    expect(w.stats()[0]).to.include({ events: 50 });
    expect(w.read(q('a', 19_949n))!.length + w.read(q('b', 19_949n))!.length).to.equal(50);
    expect(offsets(w.read(q('b', 19_990n)))).to.deep.equal([19_992, 19_995, 19_998]);
  });

  it('does nothing when turned off (0 events or 0 bytes)', () => {
    for (const limits of [{ events: 0, bytes: 1e9 }, { events: 10, bytes: 0 }]) {
      const w = new TailWindow(limits);
      w.reset(0, 0n);
      w.append('a', ev(0, 0n));
      expect(w.enabled).to.equal(false);
      expect(w.read(q('a', -1n))).to.equal(null);
      expect(w.stats()).to.deep.equal([]);
    }
  });

  it('counts reads answered and refused', () => {
    const w = new TailWindow({ events: 10, bytes: 1e9 });
    w.reset(0, 5n);
    w.read(q('a', 4n));
    w.read(q('a', 1n));
    expect({ hits: w.hits, misses: w.misses }).to.deep.equal({ hits: 1, misses: 1 });
  });

  describe('events kept as their text (no local reader when dispatched)', () => {
    /** An envelope of `account` as the fan-out gets it: its value's text and id. */
    const raw = (account: string, type: EventType = 'call.started', data: Record<string, unknown> = {}) => {
      const envelope = buildEnvelope({ account_id: account, type, data }, new Date('2026-01-01T00:00:00Z'));
      const text = encodeEnvelope(envelope).toString('utf8');
      return { envelope, text, id: peekEnvelopeId(text, account)! };
    };
    const appendRaw = (w: TailWindow, account: string, offset: bigint, r = raw(account)) => {
      w.appendText(0, offset, account, r.id, r.text, Buffer.byteLength(r.text));
      return r;
    };

    it('parses an event when a read first reaches it: the same record, order, filters and limit as parsed ones', () => {
      const w = new TailWindow({ events: 100, bytes: 1e9 });
      w.reset(0, 10n);
      const a10 = appendRaw(w, 'a', 10n, raw('a', 'call.started', { i: 10 }));
      w.append('a', ev(0, 11n, 'call.ended')); // a reader was waiting: dispatched parsed
      appendRaw(w, 'b', 12n);
      const a13 = appendRaw(w, 'a', 13n, raw('a', 'call.ended', { i: 13 }));
      w.skip(0, 14n);
      appendRaw(w, 'a', 15n);
      const page = w.read(q('a', 9n))!;
      expect(offsets(page)).to.deep.equal([10, 11, 13, 15]);
      expect(page[0]!.record).to.deep.equal(toRecord(a10.envelope, { partition: 0, offset: 10n }));
      expect(page[0]!.size).to.equal(Buffer.byteLength(a10.text));
      expect(page[2]!.record).to.deep.equal(toRecord(a13.envelope, { partition: 0, offset: 13n }));
      expect(offsets(w.read(q('a', 9n, { types: ['call.ended'] })))).to.deep.equal([11, 13]);
      expect(offsets(w.read(q('a', 10n, { limit: 2 })))).to.deep.equal([11, 13]);
      expect(offsets(w.read(q('a', 9n, { before: 13n })))).to.deep.equal([10, 11]);
      expect(offsets(w.read(q('b', 9n)))).to.deep.equal([12]);
      expect(w.read(q('a', 9n))![0], 'parsed once, then kept parsed').to.equal(page[0]);
    });

    it('passes over a second copy of an id, whichever way either copy was kept', () => {
      const w = new TailWindow({ events: 100, bytes: 1e9 });
      w.reset(0, 0n);
      const first = appendRaw(w, 'a', 0n);
      appendRaw(w, 'a', 1n, first); // the same value produced twice
      const second = ev(0, 2n);
      w.append('a', second);
      appendRaw(w, 'a', 3n, { ...raw('a'), id: second.record.id, text: JSON.stringify({ ...raw('a').envelope, id: second.record.id }) });
      expect(offsets(w.read(q('a', -1n)))).to.deep.equal([0, 2]);
      expect(w.covers(0, -1n, 4n)).to.equal(true);
    });

    it('evicts and bounds text entries like parsed ones (charged as if parsed)', () => {
      const w = new TailWindow({ events: 3, bytes: 1e9 });
      w.reset(0, 0n);
      for (let i = 0n; i < 5n; i++) appendRaw(w, 'a', i);
      expect(w.range(0)).to.deep.equal({ start: 2n, next: 5n });
      expect(offsets(w.read(q('a', 1n)))).to.deep.equal([2, 3, 4]);
      expect(w.read(q('a', 0n))).to.equal(null);
      const r = raw('a');
      expect(w.stats()[0]!.bytes).to.equal(3 * chargedBytes(Buffer.byteLength(r.text)));
    });

    it('a text that does not parse as the envelope it was appended as makes the read go to the store (null), never a different answer', () => {
      const w = new TailWindow({ events: 100, bytes: 1e9 });
      w.reset(0, 0n);
      appendRaw(w, 'a', 0n);
      const good = raw('a');
      // Its first keys name account a, but a later duplicate key says otherwise (no encoder of ours writes that).
      w.appendText(0, 1n, 'a', good.id, good.text.slice(0, -1) + ',"account_id":"b"}', 10);
      appendRaw(w, 'a', 2n);
      expect(offsets(w.read(q('a', 0n, { before: 1n }))), 'a range before it is still answered').to.deep.equal([]);
      const misses = w.misses;
      expect(w.read(q('a', -1n))).to.equal(null);
      expect(w.misses).to.equal(misses + 1);
      expect(offsets(w.read(q('a', 1n)))).to.deep.equal([2]);
    });
  });
});
