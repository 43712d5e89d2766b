import { expect } from 'chai';
import { decodeCursor } from '#shared/cursor.js';
import type { Consumer } from 'kafkajs';
import { createConsumer } from '#shared/eventlog/kafka.js';
import { baseTestEnv } from '#test-support/env.js';
import type { EventsRuntimeOverrides } from '../src/live/runtime.js';
import type { RunningApi } from '../src/server.js';
import { createAccount, type TestAccount } from './support/accounts.js';
import { call } from './support/api.js';
import { startHeldApi, type MaterializerGate } from './support/held-api.js';
import { eventually, ingest, sleep, type IngestedEvent } from './support/events.js';
import { StreamClient } from './support/sse.js';

/** While `held`, every materializer batch of the pods below waits (heartbeating) before it is written. */
const gate: MaterializerGate = { held: false };
const heldApi = (overrides: Record<string, string>, fanout: EventsRuntimeOverrides['fanout'] = {}): Promise<RunningApi> => startHeldApi(gate, overrides, fanout);

/**
 * The tail window (docs/architecture.md, "Hot paths"): reads whose cursor the
 * window covers are answered from memory, so an acknowledged event is visible
 * without waiting for the materializer; others read MongoDB as before.
 *
 * Its own topic (one partition, so every event here is in the same window and
 * the window's bounds are exact) and database: the pods below are the only
 * materializers of it, and holding them holds every write to MongoDB.
 */
describe('tail window: reads near the head come from memory', function () {
  this.timeout(90_000);
  const base = baseTestEnv();
  const env = { EVENTS_TOPIC: `${base.EVENTS_TOPIC}-tail`, MONGO_DB: `${base.MONGO_DB}_tail`, EVENTS_PARTITIONS: '1', HANDOFF_TIMEOUT_MS: '1000' };
  const WINDOW = 8;
  /** A pod with a window of 8 events. */
  let win: RunningApi;
  /** A pod without a window: every read goes to MongoDB (the reference answers). */
  let store: RunningApi;
  let acct: TestAccount;

  const poll = (api: RunningApi, query: string) => call(api.url, 'GET', `/api/v1/events${query}`, { headers: { 'x-api-key': acct.apiKey } });
  const ids = (body: any): string[] => body.events.map((e: any) => e.id);
  const tail = (api: RunningApi) => api.deps.events.tail;
  const hits = (api: RunningApi) => ({ hits: tail(api).hits, misses: tail(api).misses });

  /** Holds every materializer of the topic: nothing more reaches MongoDB until released. */
  const holdMaterializers = async (): Promise<void> => {
    gate.held = true;
    await sleep(300); // a batch already past the gate finishes writing
  };
  const releaseMaterializers = async (): Promise<void> => {
    gate.held = false;
  };
  /** Waits until the pod's fan-out has dispatched the event (it is then in the pod's window, if it has one). */
  const dispatched = (api: RunningApi, event: IngestedEvent) =>
    eventually(async () => (api.deps.events.fanout.position(0) > decodeCursor(event.cursor).offset ? true : undefined));

  before(async () => {
    win = await heldApi({ ...env, INSTANCE_ID: 'test-tail-win', TAIL_WINDOW_EVENTS: String(WINDOW) });
    store = await heldApi({ ...env, INSTANCE_ID: 'test-tail-store', TAIL_WINDOW_EVENTS: '0' });
  });

  after(async () => {
    await releaseMaterializers().catch(() => undefined);
  });

  beforeEach(async () => {
    acct = await createAccount(win.url);
  });

  it('returns an acknowledged event to a poll, a long-poll and a stream resume with a cursor while the materializer is held', async () => {
    const [first] = await ingest(win, [{ account_id: acct.userId, type: 'call.started' }]);
    await eventually(async () => ((await poll(store, '')).body.events?.length === 1 ? true : undefined));
    await holdMaterializers();
    try {
      const sent = await ingest(win, [
        { account_id: acct.userId, type: 'call.started', data: { i: 1 } },
        { account_id: acct.userId, type: 'call.ended', data: { i: 2 } },
        { account_id: acct.userId, type: 'call.started', data: { i: 3 }, occurred_at: '2026-01-01T10:00:00Z' },
      ]);
      const since = `?since=${first!.cursor}`;
      // The fan-out dispatches within milliseconds of the acknowledgement; the materializer never writes.
      const page = await eventually(async () => {
        const res = await poll(win, since);
        expect(res.status).to.equal(200);
        return res.body.events.length === 3 ? res.body : undefined;
      }, 5000);
      expect(ids(page)).to.deep.equal(sent.map((s) => s.id));
      expect(page.cursor).to.equal(sent[2]!.cursor);
      expect(page.events.map((e: any) => e.cursor)).to.deep.equal(sent.map((s) => s.cursor));
      expect(page.events[2].occurred_at).to.equal('2026-01-01T10:00:00.000Z');
      const unstored = await poll(store, since);
      expect(unstored.status, 'a pod without a window waits for MongoDB, then answers 503: never a page without them').to.equal(503);
      expect(unstored.headers.get('retry-after')).to.match(/^\d+$/);

      const typed = (await poll(win, `${since}&type=call.started`)).body;
      expect(ids(typed)).to.deep.equal([sent[0]!.id, sent[2]!.id]);
      const limited = (await poll(win, `${since}&limit=1`)).body;
      expect(limited).to.deep.include({ cursor: sent[0]!.cursor });
      expect(ids(limited)).to.deep.equal([sent[0]!.id]);
      const atHead = (await poll(win, `?since=${sent[2]!.cursor}`)).body;
      expect(atHead).to.deep.equal({ events: [], cursor: sent[2]!.cursor });

      const waited = await call(win.url, 'POST', '/api/v1/events/wait', { headers: { 'x-api-key': acct.apiKey }, body: { since: first!.cursor, timeout_ms: 5000 } });
      expect(waited.status, JSON.stringify(waited.body)).to.equal(200);
      expect(waited.body.event.id).to.equal(sent[0]!.id);
      const typedWait = await call(win.url, 'POST', '/api/v1/events/wait', { headers: { 'x-api-key': acct.apiKey }, body: { since: first!.cursor, types: ['call.ended'], timeout_ms: 5000 } });
      expect(typedWait.body.event?.id).to.equal(sent[1]!.id);

      const token = await call(win.url, 'POST', '/api/v1/events/stream-token', { headers: { 'x-api-key': acct.apiKey } });
      const stream = new StreamClient(new URL(token.body.stream_url, win.url).href, { lastEventId: first!.cursor });
      try {
        await stream.until((c) => c.events.length >= 3, 5000);
        expect(stream.events.map((e) => e.record.id)).to.deep.equal(sent.map((s) => s.id));
        expect(stream.errors).to.deep.equal([]);
      } finally {
        stream.close();
      }

      // Answers from memory, then the store's answers once the materializer has written: the same pages.
      await releaseMaterializers();
      for (const query of [since, `${since}&type=call.started`, `${since}&type=call.ended`, `${since}&limit=1`, `${since}&limit=2&type=call.started`]) {
        const fromStore = await eventually(async () => {
          const res = await poll(store, `?since=${first!.cursor}&limit=100`);
          return res.body.events?.length === 3 ? (await poll(store, query)).body : undefined;
        }, 30_000);
        const before = hits(win);
        expect((await poll(win, query)).body, query).to.deep.equal(fromStore);
        expect(hits(win).hits, 'answered from the window').to.equal(before.hits + 1);
      }
    } finally {
      await releaseMaterializers();
    }
  });

  it('events dispatched while nobody here waited for their account (kept unparsed) reach a reader that comes later: all, in order, then live ones', async () => {
    const other = await createAccount(win.url);
    const [first] = await ingest(win, [{ account_id: acct.userId, type: 'call.started' }]);
    await dispatched(win, first!);
    // A reader of the other account is held on this pod: its events are parsed when dispatched, this account's are not.
    const held = await call(win.url, 'POST', '/api/v1/events/stream-token', { headers: { 'x-api-key': other.apiKey } });
    const otherStream = new StreamClient(new URL(held.body.stream_url, win.url).href);
    await holdMaterializers();
    try {
      await eventually(async () => (win.deps.events.registry.hasAccount(other.userId) ? true : undefined));
      const sent = await ingest(win, [
        { account_id: acct.userId, type: 'call.started', data: { i: 1 } },
        { account_id: other.userId, type: 'call.started', data: { i: 2 } },
        { account_id: acct.userId, type: 'call.ended', data: { i: 3 } },
        { account_id: other.userId, type: 'call.ended', data: { i: 4 } },
        { account_id: acct.userId, type: 'message.received', data: { i: 5 }, occurred_at: '2026-01-01T10:00:00Z' },
      ]);
      const mine = sent.filter((_, i) => i % 2 === 0);
      await dispatched(win, sent.at(-1)!);
      // The window holds the last 8 offsets (older ones, kept either way, are evicted as these come): at least this account's three are text.
      expect(tail(win).stats()[0]!.texts, "this account's events are kept as text").to.be.at.least(3);
      await otherStream.until((c) => c.events.length >= 2, 5000);
      expect(otherStream.events.map((e) => e.record.id), 'the waited account got its events live').to.deep.equal([sent[1]!.id, sent[3]!.id]);

      // A stream resuming from the cursor before them: all three, in order, from memory (MongoDB is held), then live ones.
      const token = await call(win.url, 'POST', '/api/v1/events/stream-token', { headers: { 'x-api-key': acct.apiKey } });
      const stream = new StreamClient(new URL(token.body.stream_url, win.url).href, { lastEventId: first!.cursor });
      try {
        await stream.until((c) => c.events.length >= 3, 5000);
        const [live] = await ingest(win, [{ account_id: acct.userId, type: 'call.started', data: { i: 6 } }]);
        await stream.until((c) => c.events.length >= 4, 5000);
        expect(stream.events.map((e) => e.record.id)).to.deep.equal([...mine, live!].map((s) => s.id));
        expect(stream.events.map((e) => e.id)).to.deep.equal([...mine, live!].map((s) => s.cursor));
        expect(stream.events[2]!.record.occurred_at).to.equal('2026-01-01T10:00:00.000Z');
        expect(stream.errors).to.deep.equal([]);
      } finally {
        stream.close();
      }
      const page = (await poll(win, `?since=${first!.cursor}`)).body;
      expect(ids(page).slice(0, 3)).to.deep.equal(mine.map((s) => s.id));
      expect(page.events[1]).to.deep.include({ type: 'call.ended', data: { i: 3 }, cursor: mine[1]!.cursor });
      const waited = await call(win.url, 'POST', '/api/v1/events/wait', { headers: { 'x-api-key': acct.apiKey }, body: { since: first!.cursor, types: ['call.ended'], timeout_ms: 5000 } });
      expect(waited.body.event?.id).to.equal(mine[1]!.id);

      // The store's answers, once written, are the same pages.
      await releaseMaterializers();
      for (const query of [`?since=${first!.cursor}`, `?since=${first!.cursor}&type=message.received`, `?since=${mine[0]!.cursor}&limit=1`]) {
        const fromStore = await eventually(async () => {
          const res = await poll(store, `?since=${first!.cursor}`);
          return res.body.events?.length === 4 ? (await poll(store, query)).body : undefined;
        }, 30_000);
        expect((await poll(win, query)).body, query).to.deep.equal(fromStore);
      }
    } finally {
      otherStream.close();
      await releaseMaterializers();
    }
  });

  it('a cursor just inside the window is answered from memory; one just outside (evicted) falls back to MongoDB with the same events', async () => {
    await holdMaterializers();
    let sent: IngestedEvent[];
    try {
      sent = await ingest(win, Array.from({ length: WINDOW + 4 }, (_, i) => ({ account_id: acct.userId, type: i % 3 ? 'call.started' : 'call.ended', data: { i } })));
      await dispatched(win, sent.at(-1)!);
      // One partition, nothing else written meanwhile: the window holds exactly the last 8 of them.
      expect(tail(win).range(0)).to.deep.equal({ start: decodeCursor(sent[4]!.cursor).offset, next: decodeCursor(sent.at(-1)!.cursor).offset + 1n });

      const inside = await poll(win, `?since=${sent[3]!.cursor}`);
      expect(ids(inside.body), 'every event after the cursor, with MongoDB held').to.deep.equal(sent.slice(4).map((s) => s.id));
      const before = hits(win);
      const outside = await poll(win, `?since=${sent[2]!.cursor}`);
      expect(hits(win).hits, 'not answered from the window').to.equal(before.hits);
      expect(outside.status, 'MongoDB holds none of them yet: 503, never a gap or a page without them').to.equal(503);
      expect(outside.headers.get('retry-after')).to.match(/^\d+$/);
    } finally {
      await releaseMaterializers();
    }
    await eventually(async () => ((await poll(store, `?since=${sent[2]!.cursor}`)).body.events?.length === WINDOW + 1 ? true : undefined), 30_000);
    for (const query of [`?since=${sent[2]!.cursor}`, `?since=${sent[2]!.cursor}&type=call.ended`, `?since=${sent[2]!.cursor}&limit=3`]) {
      const fromStore = (await poll(store, query)).body;
      const before = hits(win);
      const res = await poll(win, query);
      expect(hits(win).misses, 'outside the window').to.equal(before.misses + 1);
      expect(res.body, query).to.deep.equal(fromStore);
    }
    expect(ids((await poll(win, `?since=${sent[2]!.cursor}`)).body)).to.deep.equal(sent.slice(3).map((s) => s.id));
  });

  it('a pod whose window starts after the cursor (freshly started) reads MongoDB, and its own window from its start', async () => {
    const sent = await ingest(win, Array.from({ length: 5 }, (_, i) => ({ account_id: acct.userId, type: 'message.received', data: { i } })));
    await eventually(async () => ((await poll(store, `?since=${sent[0]!.cursor}`)).body.events?.length === 4 ? true : undefined));
    const fresh = await heldApi({ ...env, INSTANCE_ID: 'test-tail-fresh', TAIL_WINDOW_EVENTS: String(WINDOW) });
    try {
      expect(tail(fresh).range(0)!.start > decodeCursor(sent.at(-1)!.cursor).offset, 'the window starts after every event sent').to.equal(true);
      const before = hits(fresh);
      const res = await poll(fresh, `?since=${sent[0]!.cursor}`);
      expect(hits(fresh)).to.deep.equal({ hits: before.hits, misses: before.misses + 1 });
      expect(ids(res.body)).to.deep.equal(sent.slice(1).map((s) => s.id));
      expect(res.body).to.deep.equal((await poll(win, `?since=${sent[0]!.cursor}`)).body);
      const waited = await call(fresh.url, 'POST', '/api/v1/events/wait', { headers: { 'x-api-key': acct.apiKey }, body: { since: sent[2]!.cursor, timeout_ms: 5000 } });
      expect(waited.body.event?.id, 'a long-poll resumes from MongoDB').to.equal(sent[3]!.id);

      // Events after the pod started are in its window: with the materializer held, a cursor at its start is answered.
      await holdMaterializers();
      const [next] = await ingest(win, [{ account_id: acct.userId, type: 'message.received', data: { i: 5 } }]);
      await dispatched(fresh, next!);
      const fromWindow = await poll(fresh, `?since=${sent.at(-1)!.cursor}`);
      expect(ids(fromWindow.body)).to.deep.equal([next!.id]);
    } finally {
      await releaseMaterializers();
      await fresh.close();
    }
  });

  for (const silent of [true, false]) {
    it(silent
      ? 'a pod whose fan-out has gone silent does not answer from its window: MongoDB moves on without it'
      : 'a pod whose fan-out is behind the log answers from MongoDB, which has every event acknowledged before the read', async () => {
      const [first] = await ingest(win, [{ account_id: acct.userId, type: 'call.started' }]);
      await eventually(async () => ((await poll(store, '')).body.events?.length === 1 ? true : undefined));
      // Its fan-out "runs" and dispatches nothing (and the watchdog is far away): its window stays at its start.
      // Silent: the window is refused after 300 ms of silence. Not silent: the window still answers, up to its head.
      const deaf = await heldApi(
        { ...env, INSTANCE_ID: `test-tail-deaf-${silent}`, TAIL_WINDOW_EVENTS: String(WINDOW) },
        {
          stallMs: 60_000,
          tailSilenceMs: silent ? 300 : 60_000,
          newConsumer: (kafka, groupId) => {
            const real = createConsumer(kafka, groupId);
            return Object.assign(Object.create(real) as Consumer, { connect: async () => {}, subscribe: async () => {}, run: async () => {}, disconnect: async () => {}, on: () => () => {}, seek: () => {} });
          },
        },
      );
      try {
        expect(tail(deaf).covers(0, decodeCursor(first!.cursor).offset), 'the cursor is at the start of its window').to.equal(true);
        const sent = await ingest(win, [{ account_id: acct.userId, type: 'call.started' }, { account_id: acct.userId, type: 'call.ended' }]);
        await eventually(async () => ((await poll(store, `?since=${first!.cursor}`)).body.events?.length === 2 ? true : undefined));
        if (silent) await sleep(400);
        const before = hits(deaf);
        // Behind the log's head: the window cannot answer for the events after its own head; MongoDB has them all.
        const res = await poll(deaf, `?since=${first!.cursor}`);
        expect(res.status, JSON.stringify(res.body)).to.equal(200);
        const page = res.body;
        expect(ids(page)).to.deep.equal(sent.map((e) => e.id));
        expect(page.cursor).to.equal(sent[1]!.cursor);
        if (silent) expect(hits(deaf), 'refused by the window').to.deep.equal({ hits: before.hits, misses: before.misses + 1 });
        else expect(hits(deaf), 'the window covers the cursor but not the head: MongoDB answered').to.deep.equal(before);
        expect(deaf.deps.events.fanout.position(0), 'its fan-out saw none of them').to.equal(decodeCursor(first!.cursor).offset + 1n);
        const typed = (await poll(deaf, `?since=${first!.cursor}&type=call.ended&limit=1`)).body;
        expect(ids(typed)).to.deep.equal([sent[1]!.id]);
      } finally {
        await deaf.close();
      }
    });
  }
});
