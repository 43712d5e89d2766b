import { expect } from 'chai';
import { decodeCursor } from '#shared/cursor.js';
import { baseTestEnv } from '#test-support/env.js';
import type { EventPageHeadDoc } from '#shared/mongo/documents.js';
import { headId, pageId, streamId } from '../src/event-store/pages.js';
import { floorId } from '../src/event-store/retention.js';
import type { RunningApi } from '../src/server.js';
import { createAccount, type TestAccount } from './support/accounts.js';
import { call, startTestApi } from './support/api.js';
import { eventually, ingest } from './support/events.js';

const DAY = 24 * 3600 * 1000;

/**
 * Retention against the real services: history older than EVENT_RETENTION_DAYS
 * is swept (the materializer's sweep, run here with a clock past the
 * retention), a cursor below it answers 410 cursor_expired naming the oldest
 * cursor, and polling without one starts at the oldest event kept.
 */
describe('event retention: expired history is deleted by _id, and old cursors answer 410', function () {
  this.timeout(120_000);
  const env = baseTestEnv();
  let api: RunningApi;
  let acct: TestAccount;

  before(async () => {
    // Its own topic and database: the floors it raises must not reach other tests' history. No tail window: every read is the store's.
    api = await startTestApi({ EVENTS_TOPIC: `${env.EVENTS_TOPIC}-retention`, MONGO_DB: `${env.MONGO_DB}_retention`, TAIL_WINDOW_EVENTS: '0', EVENT_RETENTION_DAYS: '30' });
    acct = await createAccount(api.url);
  });

  const poll = (query: string) => call(api.url, 'GET', `/api/v1/events${query}`, { headers: { 'x-api-key': acct.apiKey } });
  const pollUntil = (query: string, count: number) =>
    eventually(async () => {
      const res = await poll(query);
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      return res.body.events.length >= count ? res.body : undefined;
    });

  it('keeps what is younger than the retention, deletes the rest a sweep later, and answers 410 below it', async () => {
    // 250 old events (pages of at most 100 in each of the account's two streams), then 20 new ones.
    const old = await ingest(api, Array.from({ length: 250 }, (_, i) => ({ account_id: acct.userId, type: 'message.received', data: { i } })));
    await pollUntil('?limit=500', 250);
    await new Promise((r) => setTimeout(r, 50));
    const between = Date.now();
    await new Promise((r) => setTimeout(r, 50));
    const young = await ingest(api, Array.from({ length: 20 }, (_, i) => ({ account_id: acct.userId, type: 'message.received', data: { i: 250 + i } })));
    await pollUntil(`?limit=500&since=${old.at(-1)!.cursor}`, 20);

    const materializer = api.deps.events.materializer;
    const pages = api.deps.mongo.collections.eventPages;
    const events = api.deps.mongo.collections.events;
    const { partition, offset: firstYoung } = decodeCursor(young[0]!.cursor, 'cursor');
    // 30 days after `between`: the old events have expired, the young ones not.
    const now = new Date(between + 30 * DAY);
    await materializer.sweep(now);
    const floor = (await pages.findOne({ _id: floorId(partition) } as never)) as unknown as { offset: number };
    expect(floor.offset, 'the floor is the first young offset').to.equal(Number(firstYoung));

    // Raised but not yet deleted (readers may hold the old floor for a few seconds): the reads already start at it.
    expect(await events.countDocuments({ _id: { $in: old.map((e) => e.id) } })).to.equal(250);
    await eventually(async () => {
      const res = await poll('?limit=500');
      expect(res.status).to.equal(200);
      return res.body.events[0]?.id === young[0]!.id ? res : undefined;
    }, 10_000);
    const fromOldest = await poll('?limit=500');
    expect(fromOldest.body.events.map((e: { id: string }) => e.id)).to.deep.equal(young.map((e) => e.id));

    const expired = await poll(`?since=${old[100]!.cursor}`);
    expect(expired.status, JSON.stringify(expired.body)).to.equal(410);
    expect(expired.body.error.code).to.equal('cursor_expired');
    expect(expired.body.error.oldest_cursor).to.equal(old.at(-1)!.cursor);
    const resumed = await poll(`?limit=500&since=${expired.body.error.oldest_cursor}`);
    expect(resumed.status).to.equal(200);
    expect(resumed.body.events.map((e: { id: string }) => e.id)).to.deep.equal(young.map((e) => e.id));
    const wait = await call(api.url, 'POST', '/api/v1/events/wait', { headers: { 'x-api-key': acct.apiKey }, body: { since: old[0]!.cursor, timeout_ms: 0 } });
    expect(wait.status).to.equal(410);
    expect(wait.body.error.code).to.equal('cursor_expired');

    // A sweep after the grace deletes the old events and the pages wholly below the floor, by _id.
    const counts = await materializer.sweep(new Date(now.getTime() + 31_000));
    const total = counts.reduce((n, c) => n + c.events, 0);
    expect(total).to.equal(250);
    expect(await events.countDocuments({ _id: { $in: old.map((e) => e.id) } })).to.equal(0);
    expect(await events.countDocuments({ _id: { $in: young.map((e) => e.id) } })).to.equal(20);
    for (const type of [null, 'message.received' as const]) {
      // The 250 old events made pages (compacted from the chunks' fragments): every one but the newest is gone.
      const stream = streamId(acct.userId, partition, type);
      const head = (await pages.findOne({ _id: headId(stream) })) as EventPageHeadDoc | null;
      expect(head?.pages ?? 0, `${stream}: pages`).to.be.at.least(2);
      for (let n = 0; n < head!.pages - 1; n++) expect(await pages.findOne({ _id: pageId(stream, n) }), `${stream}:${n}`).to.equal(null);
      expect(await pages.findOne({ _id: pageId(stream, head!.pages - 1) }), `${stream}: the newest page is kept`).to.not.equal(null);
    }
    const after = await poll('?limit=500');
    expect(after.body.events.map((e: { id: string }) => e.id)).to.deep.equal(young.map((e) => e.id));
    const typed = await poll('?limit=500&type=message.received');
    expect(typed.body.events.map((e: { id: string }) => e.id)).to.deep.equal(young.map((e) => e.id));
  });
});
