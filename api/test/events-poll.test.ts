import { expect } from 'chai';
import { decodeCursor } from '#shared/cursor.js';
import type { RunningApi } from '../src/server.js';
import { bearer, createAccount, type TestAccount } from './support/accounts.js';
import { call, sharedApis } from './support/api.js';
import { eventually, fakeAccountId, ingest } from './support/events.js';

describe('cursor polling: GET /api/v1/events', function () {
  this.timeout(60_000);
  let a: RunningApi;
  let b: RunningApi;
  let acct: TestAccount;

  const poll = (api: RunningApi, query: string, who: TestAccount = acct) => call(api.url, 'GET', `/api/v1/events${query}`, { headers: { 'x-api-key': who.apiKey } });

  /** Polls until `count` events are there (the materializer runs a few ms behind the 202). */
  const pollUntil = async (api: RunningApi, query: string, count: number, who: TestAccount = acct) =>
    eventually(async () => {
      const res = await poll(api, query, who);
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      return res.body.events.length >= count ? res.body : undefined;
    });

  before(async () => {
    [a, b] = await sharedApis();
  });

  beforeEach(async () => {
    acct = await createAccount(a.url);
  });

  it('returns an event ingested on A from a poll on B, as {id, type, created_at, data, cursor}', async () => {
    const [sent] = await ingest(a, [{ account_id: acct.userId, type: 'message.received', data: { from: '+15550001', text: 'hi' }, occurred_at: '2026-01-01T10:00:00Z' }]);
    const page = await pollUntil(b, '', 1);
    expect(page.events).to.have.length(1);
    const event = page.events[0];
    expect(event).to.deep.equal({
      id: sent!.id,
      type: 'message.received',
      created_at: event.created_at,
      occurred_at: '2026-01-01T10:00:00.000Z',
      data: { from: '+15550001', text: 'hi' },
      cursor: sent!.cursor,
    });
    expect(new Date(event.created_at).toISOString()).to.equal(event.created_at);
    expect(page.cursor).to.equal(sent!.cursor);
  });

  it('pages through 250 events with limit 100: every event once, in order, and the cursor resumes exactly', async () => {
    const sent = [
      ...(await ingest(a, Array.from({ length: 150 }, (_, i) => ({ account_id: acct.userId, type: 'call.started', data: { i } })))),
      ...(await ingest(b, Array.from({ length: 100 }, (_, i) => ({ account_id: acct.userId, type: 'call.ended', data: { i: 150 + i } })))),
    ];
    await pollUntil(b, '?limit=500', 250);
    const seen: any[] = [];
    let cursor: string | null = null;
    const sizes: number[] = [];
    for (let round = 0; round < 5; round++) {
      const res = await poll(round % 2 ? a : b, `?limit=100${cursor ? `&since=${cursor}` : ''}`);
      expect(res.status).to.equal(200);
      sizes.push(res.body.events.length);
      seen.push(...res.body.events);
      if (res.body.events.length > 0) expect(res.body.cursor).to.equal(res.body.events.at(-1).cursor);
      else expect(res.body.cursor).to.equal(cursor);
      cursor = res.body.cursor;
    }
    expect(sizes).to.deep.equal([100, 100, 50, 0, 0]);
    expect(seen.map((e) => e.id)).to.deep.equal(sent.map((s) => s.id));
    expect(seen.map((e) => e.data.i)).to.deep.equal([...Array(250).keys()]);
    const offsets = seen.map((e) => decodeCursor(e.cursor).offset);
    expect(offsets.every((o, i) => i === 0 || o > offsets[i - 1]!)).to.equal(true);
  });

  it('returns nothing and a null cursor for an account without events; defaults to 100 events', async () => {
    const empty = await poll(b, '');
    expect(empty.status).to.equal(200);
    expect(empty.body).to.deep.equal({ events: [], cursor: null });
    await ingest(a, Array.from({ length: 120 }, () => ({ account_id: acct.userId, type: 'call.transcribed' })));
    await pollUntil(b, '?limit=500', 120);
    expect((await poll(b, '')).body.events).to.have.length(100);
  });

  it('filters by type', async () => {
    const sent = await ingest(a, [
      { account_id: acct.userId, type: 'call.started' },
      { account_id: acct.userId, type: 'message.sent' },
      { account_id: acct.userId, type: 'call.started' },
    ]);
    await pollUntil(b, '', 3);
    const res = await poll(b, '?type=call.started');
    expect(res.body.events.map((e: any) => e.id)).to.deep.equal([sent[0]!.id, sent[2]!.id]);
    const after = await poll(b, `?type=call.started&since=${sent[0]!.cursor}`);
    expect(after.body.events.map((e: any) => e.id)).to.deep.equal([sent[2]!.id]);
  });

  it('accepts the session token as well as the API key, and refuses no credential', async () => {
    expect((await call(b.url, 'GET', '/api/v1/events', { headers: bearer(acct.token) })).status).to.equal(200);
    expect((await call(b.url, 'GET', '/api/v1/events', { headers: bearer(acct.apiKey) })).status).to.equal(200);
    const none = await call(b.url, 'GET', '/api/v1/events');
    expect(none.status).to.equal(401);
  });

  it('answers an out-of-range limit, an unknown type, a malformed cursor or an unknown parameter with 400 naming it', async () => {
    const cases: [string, string][] = [
      ['?limit=0', 'limit'],
      ['?limit=501', 'limit'],
      ['?limit=ten', 'limit'],
      ['?type=call.exploded', 'type'],
      ['?since=nope', 'since'],
      ['?since=c1_MTIzNA', 'since'], // decodes to "1234": no partition.offset
      ['?cursor=c1_MC4w', 'cursor'],
    ];
    for (const [query, path] of cases) {
      const res = await poll(b, query);
      expect(res.status, query).to.equal(400);
      expect(res.body.error.code, query).to.equal('validation_failed');
      expect(res.body.error.details.map((d: any) => d.path), query).to.include(path);
    }
  });

  it("never returns another account's events, even given that account's cursor", async () => {
    const partitionOf = (id: string) => b.deps.events.producer.partitionOf(id);
    const mine = partitionOf(acct.userId);
    // Other accounts (ingest takes any id): one sharing our partition, one on another.
    const neighbour = accountIdWhere((id) => partitionOf(id) === mine);
    const stranger = accountIdWhere((id) => partitionOf(id) !== mine);
    const theirs = await ingest(a, [
      { account_id: neighbour, type: 'call.started', data: { secret: 1 } },
      { account_id: stranger, type: 'call.started', data: { secret: 2 } },
    ]);
    const ours = await ingest(a, [{ account_id: acct.userId, type: 'call.started' }]);
    await ingest(a, [{ account_id: neighbour, type: 'call.ended' }]); // after ours, in our partition
    await pollUntil(b, '', 1);
    const all = await poll(b, '?limit=500');
    expect(all.body.events.map((e: any) => e.id)).to.deep.equal([ours[0]!.id]);
    // A neighbour's cursor is a position in our partition: it reads our events after it, never theirs.
    const fromNeighbour = await poll(b, `?since=${theirs[0]!.cursor}`);
    expect(fromNeighbour.status).to.equal(200);
    expect(fromNeighbour.body.events.map((e: any) => e.id)).to.deep.equal([ours[0]!.id]);
    // A cursor of another partition cannot be ours at all.
    const fromStranger = await poll(b, `?since=${theirs[1]!.cursor}`);
    expect(fromStranger.status).to.equal(400);
    expect(fromStranger.body.error.details[0]).to.deep.equal({ path: 'since', message: 'is not a cursor of this account' });
  });
});

function accountIdWhere(ok: (id: string) => boolean): string {
  for (;;) {
    const id = fakeAccountId();
    if (ok(id)) return id;
  }
}
