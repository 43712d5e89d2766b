/**
 * GET /api/v1/deliveries: the attempts of all an account's subscriptions,
 * filtered and cursor-paged, on two API processes. Known attempts are written
 * straight into the collection the delivery process writes (same fields), so
 * every filter has an exact expected answer.
 */
import { expect } from 'chai';
import { MongoClient } from 'mongodb';
import { atRunEnd } from '#test-support/cleanup.js';
import { baseTestEnv } from '#test-support/env.js';
import type { AttemptDoc } from '#shared/mongo/index.js';
import type { RunningApi } from '../src/server.js';
import { searchDeliveries } from '../src/features/activity/index.js';
import { ActivityDb, MIN } from './support/activity.js';
import { bearer, createAccount, type TestAccount } from './support/accounts.js';
import { call, sharedApis } from './support/api.js';
import { connectClient } from './support/mcp.js';

describe('delivery search (GET /api/v1/deliveries)', function () {
  this.timeout(60_000);
  let a: RunningApi;
  let b: RunningApi;
  let acct: TestAccount;
  /** An account with one attempt of its own. */
  let other: TestAccount;
  let hookA: string;
  let hookB: string;
  /** Newest first, as the search answers. */
  let stored: AttemptDoc[];

  const search = (query: string, api = a, credential = acct.apiKey) => call(api.url, 'GET', `/api/v1/deliveries${query ? '?' + query : ''}`, { headers: bearer(credential) });
  const ids = (docs: { _id: string }[]): string[] => docs.map((d) => d._id);
  const found = async (query: string): Promise<string[]> => {
    const res = await search(query);
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body.next_cursor, query).to.equal(null);
    return res.body.attempts.map((x: { id: string }) => x.id);
  };
  const expected = (keep: (d: AttemptDoc) => boolean): string[] => ids(stored.filter(keep));

  before(async () => {
    [a, b] = await sharedApis();
    const client = new MongoClient(baseTestEnv().MONGO_URL!, { retryWrites: false });
    atRunEnd(() => client.close());
    const db = new ActivityDb(client.db(a.deps.config.mongo.dbName));
    acct = await createAccount(a.url);
    const subscribe = async (path: string): Promise<string> => {
      // A public literal address: no DNS, and no event of this account is ever ingested, so nothing is sent to it.
      const res = await call(a.url, 'POST', '/api/v1/webhooks', { headers: bearer(acct.apiKey), body: { url: `https://93.184.216.34/${path}`, events: ['*'] } });
      expect(res.status, JSON.stringify(res.body)).to.equal(201);
      return res.body.id;
    };
    [hookA, hookB] = [await subscribe('a'), await subscribe('b')];
    const now = Date.now();
    const at = (minutesAgo: number): Date => new Date(now - minutesAgo * MIN);
    const mk = (hook: string, minutesAgo: number, outcome: AttemptDoc['outcome'], status: number | null, type: AttemptDoc['event_type'] = 'call.completed', id?: string) =>
      db.attempt({ subscription: hook, account: acct.userId, at: at(minutesAgo), outcome, status, ms: 10, type, id });
    const docs = [
      await mk(hookA, 1, 'ok', 200),
      await mk(hookB, 2, 'http_5xx', 503, 'message.received', 'att_tie_b'),
      await mk(hookB, 2, 'http_4xx', 404, 'message.received', 'att_tie_a'), // same `at` as the one above: (at, _id) orders them
      await mk(hookA, 3, 'timeout', null, 'call.started'),
      await mk(hookA, 4, 'http_4xx', 429),
      await mk(hookB, 5, 'ok', 204, 'message.sent'),
      await mk(hookA, 6, 'http_5xx', 500, 'call.started'),
      await mk(hookB, 7, 'connect', null),
      await mk(hookA, 8, 'http_3xx', 301),
      await mk(hookA, 9, 'ok', 200, 'message.received'),
    ];
    stored = docs.sort((x, y) => y.at.getTime() - x.at.getTime() || (x._id < y._id ? 1 : -1));
    // Another account's attempts never show.
    other = await createAccount(a.url);
    await db.attempt({ subscription: 'wh_' + '0'.repeat(24), account: other.userId, at: at(1), outcome: 'ok', status: 200, ms: 1 });
  });

  it("lists every subscription's attempts newest first, with their webhook_id; pages resume exactly on either API process", async () => {
    const all = await search('');
    expect(all.status, JSON.stringify(all.body)).to.equal(200);
    expect(all.body.attempts.map((x: { id: string }) => x.id)).to.deep.equal(ids(stored));
    expect(all.body.attempts[0]).to.include({ id: stored[0]!._id, webhook_id: hookA, outcome: 'ok', status: 200, event_type: 'call.completed' });
    expect(all.body.next_cursor).to.equal(null);

    // Pages of 2, alternating processes: the cursor is the whole state. A page boundary falls between the two tied attempts.
    const seen: string[] = [];
    let cursor: string | null = null;
    for (let page = 0; page < 10; page++) {
      const res = await search(`limit=2${cursor ? `&cursor=${cursor}` : ''}`, page % 2 === 0 ? a : b);
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      seen.push(...res.body.attempts.map((x: { id: string }) => x.id));
      cursor = res.body.next_cursor;
      if (!cursor) break;
    }
    expect(seen).to.deep.equal(ids(stored));
  });

  it('filters by outcome, status range, event type, subscription and [from, to), all at once too', async () => {
    expect(await found('outcome=failed')).to.deep.equal(expected((d) => d.outcome !== 'ok'));
    expect(await found('outcome=http_5xx,timeout')).to.deep.equal(expected((d) => d.outcome === 'http_5xx' || d.outcome === 'timeout'));
    expect(await found('status=5xx')).to.deep.equal(expected((d) => d.status !== null && d.status >= 500 && d.status <= 599));
    expect(await found('status=404')).to.deep.equal(expected((d) => d.status === 404));
    expect(await found('status=300-429')).to.deep.equal(expected((d) => d.status !== null && d.status >= 300 && d.status <= 429));
    expect(await found('event_type=message.received,call.started')).to.deep.equal(expected((d) => d.event_type === 'message.received' || d.event_type === 'call.started'));
    expect(await found(`webhook_id=${hookB}`)).to.deep.equal(expected((d) => d.subscription_id === hookB));
    // from inclusive, to exclusive: exactly the attempts at minutes 3 to 6 ago.
    const from = stored.find((d) => d.status === 500)!.at;
    const to = stored.find((d) => d.outcome === 'timeout')!.at;
    const inRange = (d: AttemptDoc): boolean => d.at >= from && d.at < to;
    expect(await found(`from=${from.toISOString()}&to=${to.toISOString()}`)).to.deep.equal(expected(inRange));
    expect(await found(`from=${from.toISOString()}&to=${to.toISOString()}&outcome=failed&webhook_id=${hookA}`)).to.deep.equal(
      expected((d) => inRange(d) && d.outcome !== 'ok' && d.subscription_id === hookA),
    );
    expect(await found(`status=2xx&webhook_id=${hookB}&event_type=message.sent`)).to.have.length(1);
  });

  it("answers 400 naming the bad parameter, 404 for another account's subscription", async () => {
    const cases: [string, string][] = [
      ['outcome=nope', 'outcome'],
      ['status=600', 'status'],
      ['status=abc', 'status'],
      ['status=500-400', 'status'],
      ['event_type=call.nope', 'event_type'],
      ['cursor=not-a-cursor', 'cursor'],
      ['from=yesterday', 'from'],
      [`from=${new Date().toISOString()}&to=${new Date(Date.now() - MIN).toISOString()}`, 'to'],
      ['limit=0', 'limit'],
      ['limit=201', 'limit'],
      ['webhook_id=nope', 'webhook_id'],
      ['sort=asc', 'sort'],
    ];
    for (const [query, path] of cases) {
      const res = await search(query, b);
      expect(res.status, query).to.equal(400);
      expect(res.body.error.code, query).to.equal('validation_failed');
      expect(res.body.error.details.map((d: { path: string }) => d.path), query).to.include(path);
    }
    const res = await search(`webhook_id=${hookA}`, a, other.apiKey);
    expect(res.status).to.equal(404);
    const mine = await search('', b, other.apiKey);
    expect(mine.body.attempts).to.have.length(1); // its own attempt only
  });

  it('the MCP tool search_deliveries answers what the route answers, and pages with its next_cursor', async () => {
    const mcp = await connectClient(b.url, bearer(acct.apiKey));
    try {
      await mcp.listTools(); // the client then checks each result against the tool's outputSchema
      const first = await mcp.callTool({ name: 'search_deliveries', arguments: { outcome: 'failed', limit: 4 } });
      expect(first.isError, JSON.stringify(first.content)).to.not.equal(true);
      expect(first.structuredContent).to.deep.equal((await search('outcome=failed&limit=4')).body);
      const { next_cursor: cursor } = first.structuredContent as { next_cursor: string };
      const rest = (await mcp.callTool({ name: 'search_deliveries', arguments: { outcome: 'failed', cursor } })).structuredContent as { attempts: { id: string }[]; next_cursor: null };
      const firstIds = (first.structuredContent as { attempts: { id: string }[] }).attempts.map((x) => x.id);
      expect([...firstIds, ...rest.attempts.map((x) => x.id)]).to.deep.equal(expected((d) => d.outcome !== 'ok'));
      const refused = await mcp.callTool({ name: 'search_deliveries', arguments: { status: '9xx' } });
      expect(refused.isError).to.equal(true);
      expect((refused.content as { text: string }[])[0]!.text).to.include('status');
    } finally {
      await mcp.close();
    }
  });

  it('stops at the scan bound with a cursor that continues: sparse matches are all found, each once', async () => {
    const query = { outcome: 'ok', limit: 50 };
    const seen: string[] = [];
    const pages: number[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 10; page++) {
      const res = await searchDeliveries(a.deps, acct.userId, { ...query, cursor }, { maxScan: 3 });
      pages.push(res.attempts.length);
      seen.push(...res.attempts.map((x) => x.id));
      if (!res.next_cursor) break;
      cursor = res.next_cursor;
    }
    expect(seen).to.deep.equal(expected((d) => d.outcome === 'ok'));
    // 10 attempts examined 3 at a time: 4 requests, one of them (minutes 6 to 8 ago) with no match and a cursor all the same.
    expect(pages).to.deep.equal([1, 1, 0, 1]);
  });
});
