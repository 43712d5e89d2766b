import { expect } from 'chai';
import net from 'node:net';
import { decodeCursor } from '#shared/cursor.js';
import { baseTestEnv } from '#test-support/env.js';
import { waitForEvent } from '../src/features/events/long-poll.js';
import type { RunningApi } from '../src/server.js';
import { createAccount, type TestAccount } from './support/accounts.js';
import { call, sharedApis, startTestApi } from './support/api.js';
import { eventually, fakeAccountId, ingest, sleep } from './support/events.js';

describe('long-poll: POST /api/v1/events/wait', function () {
  this.timeout(60_000);
  let a: RunningApi;
  let b: RunningApi;
  let acct: TestAccount;

  const wait = (api: RunningApi, body: unknown, who: TestAccount = acct) => call(api.url, 'POST', '/api/v1/events/wait', { headers: { 'x-api-key': who.apiKey }, body });

  /** Starts a wait and resolves once the server has registered it (so an event after this is live). */
  async function waitRegistered(api: RunningApi, body: unknown, who: TestAccount = acct) {
    const before = api.deps.events.registry.size;
    const pending = wait(api, body, who);
    await eventually(async () => (api.deps.events.registry.size > before ? true : undefined), 5000, 5);
    return { pending }; // wrapped: an async function would otherwise wait for the response itself
  }

  before(async () => {
    [a, b] = await sharedApis();
  });

  beforeEach(async () => {
    acct = await createAccount(a.url);
  });

  it('is released on B by an event ingested on A within a second', async () => {
    const { pending } = await waitRegistered(b, { timeout_ms: 20_000 });
    const [sent] = await ingest(a, [{ account_id: acct.userId, type: 'call.started', data: { n: 1 } }]);
    const acked = Date.now();
    const res = await pending;
    expect(Date.now() - acked).to.be.below(1000);
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body.event).to.include({ id: sent!.id, type: 'call.started', cursor: sent!.cursor });
    expect(res.body.event.data).to.deep.equal({ n: 1 });
    expect(res.body).to.not.have.property('timed_out');
  });

  it('returns only a type it waits for', async () => {
    const { pending } = await waitRegistered(b, { types: ['message.sent', 'call.ended'], timeout_ms: 20_000 });
    await ingest(a, [{ account_id: acct.userId, type: 'call.started' }]);
    await sleep(300);
    const [wanted] = await ingest(a, [{ account_id: acct.userId, type: 'call.ended' }]);
    const res = await pending;
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body.event.id).to.equal(wanted!.id);
  });

  it('times out with {event: null, timed_out: true} after about timeout_ms', async () => {
    const started = Date.now();
    const res = await wait(b, { timeout_ms: 1200 });
    const took = Date.now() - started;
    expect(res.status).to.equal(200);
    expect(res.body).to.include({ event: null, timed_out: true });
    expect(took).to.be.within(1100, 5000);
  });

  it('with since, returns an event already after the cursor at once', async () => {
    const sent = await ingest(a, [
      { account_id: acct.userId, type: 'call.started' },
      { account_id: acct.userId, type: 'message.received' },
      { account_id: acct.userId, type: 'call.ended' },
    ]);
    const started = Date.now();
    const res = await wait(b, { since: sent[0]!.cursor, timeout_ms: 20_000 });
    expect(Date.now() - started).to.be.below(5000);
    expect(res.body.event.id).to.equal(sent[1]!.id);
    const filtered = await wait(b, { since: sent[0]!.cursor, types: ['call.ended'], timeout_ms: 20_000 });
    expect(filtered.body.event.id).to.equal(sent[2]!.id);
  });

  it('lets a client that loops on the returned cursors see every event once, across A and B', async () => {
    const sent = await ingest(a, Array.from({ length: 5 }, (_, i) => ({ account_id: acct.userId, type: 'message.received' as const, data: { i } })));
    // Start from a timed-out wait's cursor: it covers what A's fan-out has passed, which includes `sent` once it got there.
    const last = decodeCursor(sent.at(-1)!.cursor);
    await eventually(async () => (a.deps.events.fanout.position(last.partition) > last.offset ? true : undefined));
    const first = await wait(a, { timeout_ms: 0 });
    expect(first.body).to.include({ event: null, timed_out: true });
    let cursor: string = first.body.cursor;
    const more = await ingest(b, Array.from({ length: 5 }, (_, i) => ({ account_id: acct.userId, type: 'message.received' as const, data: { i: 5 + i } })));
    const seen: string[] = [];
    for (let i = 0; i < 6; i++) {
      const res = await wait(i % 2 ? a : b, { since: cursor, timeout_ms: 300 });
      if (res.body.event) {
        seen.push(res.body.event.id);
        cursor = res.body.event.cursor;
      } else cursor = res.body.cursor;
    }
    expect(seen).to.deep.equal(more.map((m) => m.id));
    expect(seen).to.not.include.members(sent.map((s) => s.id));
  });

  it('runs on an HTTP server whose timeouts cannot cut a 55 s wait short', () => {
    for (const api of [a, b]) {
      const { requestTimeout, timeout } = api.server;
      // requestTimeout bounds only the arrival of the request (body included), not the
      // wait for the answer: api/test/bounded-inputs.test.ts shows a wait outlasting it.
      expect(requestTimeout, 'requestTimeout').to.be.greaterThan(0);
      expect(timeout === 0 || timeout > 60_000, 'socket timeout').to.equal(true);
    }
  });

  it("is not released by another account's event", async () => {
    const { pending } = await waitRegistered(b, { timeout_ms: 1000 });
    await ingest(a, [{ account_id: fakeAccountId(), type: 'call.started' }]);
    const res = await pending;
    expect(res.body).to.include({ event: null, timed_out: true });
  });

  it('answers a bad timeout, type, cursor or field with 400 naming it', async () => {
    const cases: [unknown, string][] = [
      [{ timeout_ms: 55_001 }, 'timeout_ms'],
      [{ timeout_ms: -1 }, 'timeout_ms'],
      [{ timeout_ms: 1.5 }, 'timeout_ms'],
      [{ types: ['call.exploded'] }, 'types.0'],
      [{ types: 'call.started' }, 'types'],
      [{ since: 'c1_bad' }, 'since'],
      [{ wait: 5 }, 'wait'],
    ];
    for (const [body, path] of cases) {
      const res = await wait(b, body);
      expect(res.status, JSON.stringify(body)).to.equal(400);
      expect(res.body.error.details.map((d: any) => d.path), JSON.stringify(body)).to.include(path);
    }
    expect((await call(b.url, 'POST', '/api/v1/events/wait', { body: { timeout_ms: 0 } })).status).to.equal(401);
  });

  it('answers a wait it held with the bytes Koa writes for one it answers at once', async () => {
    // timeout_ms 0 is answered inside the middleware chain (Koa writes it); 300 ms waits
    // parked and is written by the long-poll itself. Only the date, the cursor and the
    // rate-limit counters may differ.
    const now = await rawWait(b.url, acct.apiKey, 0);
    const held = await rawWait(b.url, acct.apiKey, 300);
    const masked = (raw: string): string =>
      raw
        .replace(/^Date: .*$/im, 'Date: -')
        .replace(/^(RateLimit-(?:Remaining|Reset)): .*$/gim, '$1: -')
        .replace(/"cursor":"[^"]*"/, '"cursor":"-"')
        .replace(/^Content-Length: \d+$/im, 'Content-Length: -');
    expect(masked(held)).to.equal(masked(now));
    expect(held).to.match(/^HTTP\/1\.1 200 OK\r\n/);
    const [head, body] = held.split('\r\n\r\n') as [string, string];
    expect(head).to.match(/\r\nContent-Type: application\/json; charset=utf-8\r\nContent-Length: \d+\r\n/);
    expect(Number(/Content-Length: (\d+)/.exec(head)![1])).to.equal(Buffer.byteLength(body));
    expect(JSON.parse(body)).to.include({ event: null, timed_out: true });
  });

  it('frees the waiter of a client that disconnects, at once', async function () {
    // Over HTTP the cost is authentication (two MongoDB round trips per request on
    // the test server), so this wave is 500; the 10,000 below go through the service.
    const registry = b.deps.events.registry;
    const baseline = registry.size;
    const aborts = Array.from({ length: 500 }, () => new AbortController());
    const requests = aborts.map((ac) =>
      fetch(`${b.url}/api/v1/events/wait`, {
        method: 'POST',
        headers: { 'x-api-key': acct.apiKey, 'content-type': 'application/json' },
        body: JSON.stringify({ timeout_ms: 55_000 }),
        signal: ac.signal,
      }).catch(() => null),
    );
    await eventually(async () => (registry.size >= baseline + aborts.length ? true : undefined), 30_000, 10);
    for (const ac of aborts) ac.abort();
    await Promise.all(requests);
    await eventually(async () => (registry.size === baseline ? true : undefined), 5000, 10);
  });

  it('leaks no waiter after 10,000 abandoned waits', async () => {
    const registry = b.deps.events.registry;
    const baseline = registry.size;
    const deadlines = b.deps.held.deadlines;
    const timers = deadlines.timers;
    for (let wave = 0; wave < 10; wave++) {
      const aborts = Array.from({ length: 1000 }, () => new AbortController());
      const waits = aborts.map((ac, i) => waitForEvent(b.deps, acct.userId, { timeout_ms: 55_000, ...(i % 2 ? { types: ['call.started' as const] } : {}) }, ac.signal));
      await eventually(async () => (registry.size === baseline + aborts.length ? true : undefined), 10_000, 5);
      for (const ac of aborts) ac.abort();
      const results = await Promise.all(waits);
      expect(results.every((r) => r.event === null)).to.equal(true);
      expect(registry.size).to.equal(baseline);
    }
    expect(registry.hasAccount(acct.userId)).to.equal(false);
    // Their deadlines went with them: no timer is left behind for a wait that has ended.
    expect(deadlines.timers).to.be.at.most(timers);
  });
});

/** A long-poll over a raw socket: the response's bytes as sent (Connection: close, so the server ends it). */
function rawWait(url: string, apiKey: string, timeoutMs: number): Promise<string> {
  const { hostname, port } = new URL(url);
  const body = JSON.stringify({ timeout_ms: timeoutMs });
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname, () => {
      socket.write(
        `POST /api/v1/events/wait HTTP/1.1\r\nHost: ${hostname}:${port}\r\nX-API-Key: ${apiKey}\r\nX-Request-Id: raw-wait-1\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
      );
    });
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    socket.on('error', reject);
  });
}

describe('long-poll at shutdown', function () {
  this.timeout(60_000);

  it('answers pending long-polls with timed_out when the process stops, so clients loop elsewhere', async () => {
    const env = baseTestEnv();
    const api = await startTestApi({ EVENTS_TOPIC: `${env.EVENTS_TOPIC}-shutdown`, MONGO_DB: `${env.MONGO_DB}_shutdown` });
    const acct = await createAccount(api.url);
    const pending = call(api.url, 'POST', '/api/v1/events/wait', { headers: { 'x-api-key': acct.apiKey }, body: { timeout_ms: 50_000 } });
    await eventually(async () => (api.deps.events.registry.size === 1 ? true : undefined));
    const started = Date.now();
    const closing = api.close();
    const res = await pending;
    expect(Date.now() - started).to.be.below(5000);
    expect(res.status).to.equal(200);
    expect(res.body).to.include({ event: null, timed_out: true });
    await closing;
  });

  it('returns a cursor no later than what it checked: events ingested during the shutdown reach a client looping on it on another process', async () => {
    const [a, b] = await sharedApis();
    const acct = await createAccount(a.url);
    const partition = a.deps.events.producer.partitionOf(acct.userId);
    let other = fakeAccountId();
    while (a.deps.events.producer.partitionOf(other) !== partition) other = fakeAccountId();
    const [first] = await ingest(a, [{ account_id: acct.userId, type: 'call.started' }]);
    await ingest(a, [{ account_id: other, type: 'call.started' }]); // the cursor is now behind the partition's end
    // A process started now cannot vouch for offsets before it started: resuming from `first` waits for the
    // materializer. That wait is held open (the test's gate) while the process shuts down and events arrive.
    const api = await startTestApi({ INSTANCE_ID: 'test-shutdown-cursor' });
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const watermarks = api.deps.events.watermarks;
    const waitFor = watermarks.waitFor.bind(watermarks);
    let held = 0;
    watermarks.waitFor = async (p, offset, timeoutMs) => {
      held += 1;
      await gate;
      return waitFor(p, offset, timeoutMs);
    };
    const pending = call(api.url, 'POST', '/api/v1/events/wait', { headers: { 'x-api-key': acct.apiKey }, body: { timeout_ms: 50_000, since: first!.cursor } });
    await eventually(async () => (held > 0 ? true : undefined));
    const closing = api.close(); // graceful: waiters are closed first, the consumers stop later
    await eventually(async () => (api.deps.events.registry.size === 0 || api.deps.lifecycle.isStopping ? true : undefined));
    const during = await ingest(b, [{ account_id: acct.userId, type: 'message.received', data: { during: 'shutdown' } }]);
    const offset = decodeCursor(during[0]!.cursor).offset;
    await eventually(async () => (api.deps.events.fanout.position(partition) > offset ? true : undefined), 20_000);
    release();
    const res = await pending;
    await closing;
    expect(res.status).to.equal(200);
    expect(res.body).to.include({ event: null, timed_out: true });
    expect(decodeCursor(res.body.cursor).offset < offset, `the returned cursor ${res.body.cursor} is before the event at ${offset}`).to.equal(true);
    // The client loops on the cursor against another process: it gets the event.
    const next = await call(b.url, 'POST', '/api/v1/events/wait', { headers: { 'x-api-key': acct.apiKey }, body: { timeout_ms: 5000, since: res.body.cursor } });
    expect(next.body.event?.id, 'the event ingested during the shutdown').to.equal(during[0]!.id);
  });
});
