/**
 * A dormant fan-out (no reader and no read for FANOUT_DORMANT_MS) fetches
 * nothing; the first reader wakes it, and no reader misses an event for it:
 * resumes read what the dormant pod never fetched from MongoDB, and a reader
 * without a cursor gets every event acknowledged after it registered.
 */
import { expect } from 'chai';
import { decodeCursor } from '#shared/cursor.js';
import { baseTestEnv } from '#test-support/env.js';
import type { RunningApi } from '../src/server.js';
import { createAccount } from './support/accounts.js';
import { call, startTestApi } from './support/api.js';
import { eventually, ingest, sleep } from './support/events.js';
import { StreamClient } from './support/sse.js';

describe('fan-out: dormant while unused, woken by the first reader', function () {
  this.timeout(120_000);
  const base = baseTestEnv();
  const env = { EVENTS_TOPIC: `${base.EVENTS_TOPIC}-dormant`, MONGO_DB: `${base.MONGO_DB}_dormant`, EVENTS_PARTITIONS: '1' };
  let busy: RunningApi;
  let sleepy: RunningApi;

  before(async () => {
    busy = await startTestApi({ ...env, INSTANCE_ID: 'test-dormant-busy', FANOUT_DORMANT_MS: '0' });
    sleepy = await startTestApi({ ...env, INSTANCE_ID: 'test-dormant-sleepy', FANOUT_DORMANT_MS: '300' });
  });

  const fanout = () => sleepy.deps.events.fanout;
  const asleep = () => eventually(async () => (fanout().dormant ? true : undefined), 10_000);

  it('fetches nothing while dormant; a resume reads what it missed, then live events, with no gap and no duplicate', async () => {
    const acct = await createAccount(busy.url);
    const auth = { 'x-api-key': acct.apiKey };
    const [first] = await ingest(busy, [{ account_id: acct.userId, type: 'call.started', data: { i: 0 } }]);
    await asleep();
    const at = fanout().position(0);
    const missed = await ingest(busy, [1, 2, 3].map((i) => ({ account_id: acct.userId, type: 'message.received', data: { i } })));
    expect(await busy.deps.events.watermarks.waitFor(0, decodeCursor(missed[2]!.cursor).offset, 30_000), 'stored in MongoDB').to.equal(true);
    await sleep(500);
    expect(fanout().position(0), 'a dormant fan-out fetched none of them').to.equal(at);
    expect(fanout().dormant).to.equal(true);

    // A stream resume wakes it: what it never fetched comes from MongoDB, then live events.
    const token = await call(sleepy.url, 'POST', '/api/v1/events/stream-token', { headers: auth });
    const stream = new StreamClient(new URL(token.body.stream_url, sleepy.url).href, { lastEventId: first!.cursor });
    try {
      await stream.until((c) => c.events.length >= 3, 10_000);
      expect(fanout().dormant, 'woken by the reader').to.equal(false);
      const live = await ingest(busy, [4, 5].map((i) => ({ account_id: acct.userId, type: 'message.received', data: { i } })));
      await stream.until((c) => c.events.length >= 5, 10_000);
      await sleep(200);
      expect(stream.events.map((e) => e.record.id)).to.deep.equal([...missed, ...live].map((e) => e.id));
      expect(stream.errors).to.deep.equal([]);
    } finally {
      stream.close();
    }
    const page = await call(sleepy.url, 'GET', `/api/v1/events?since=${first!.cursor}`, { headers: auth });
    expect(page.body.events.map((e: any) => e.data.i)).to.deep.equal([1, 2, 3, 4, 5]);
  });

  it('a long-poll without a cursor on a dormant pod gets the next event; a poll there misses nothing', async () => {
    const acct = await createAccount(busy.url);
    const auth = { 'x-api-key': acct.apiKey };
    const [first] = await ingest(busy, [{ account_id: acct.userId, type: 'call.started', data: { i: 0 } }]);
    await asleep();
    const earlier = await ingest(busy, [{ account_id: acct.userId, type: 'call.ended', data: { i: 1 } }]);
    // The poll is answered (from MongoDB) whether or not the fan-out is awake yet, and wakes it.
    const polled = await call(sleepy.url, 'GET', `/api/v1/events?since=${first!.cursor}`, { headers: auth });
    expect(polled.status, JSON.stringify(polled.body)).to.equal(200);
    expect(polled.body.events.map((e: any) => e.id)).to.deep.equal(earlier.map((e) => e.id));

    await asleep();
    const waiting = call(sleepy.url, 'POST', '/api/v1/events/wait', { headers: auth, body: { timeout_ms: 20_000 } });
    await eventually(async () => (sleepy.deps.events.registry.hasAccount(acct.userId) ? true : undefined));
    const [next] = await ingest(busy, [{ account_id: acct.userId, type: 'message.received', data: { i: 2 } }]);
    const res = await waiting;
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body.event?.id, 'released by the event acknowledged after it registered').to.equal(next!.id);
  });
});
