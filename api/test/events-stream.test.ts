import { expect } from 'chai';
import { baseTestEnv } from '#test-support/env.js';
import { mintStreamToken } from '../src/features/streams/tokens.js';
import type { RunningApi } from '../src/server.js';
import { bearer, createAccount, type TestAccount } from './support/accounts.js';
import { call, sharedApis, startTestApi } from './support/api.js';
import { eventually, fakeAccountId, ingest, sleep } from './support/events.js';
import { StreamClient } from './support/sse.js';

/** A stream URL for a real account, minted over HTTP with its API key. */
async function streamUrl(api: RunningApi, who: TestAccount, query = ''): Promise<string> {
  const res = await call(api.url, 'POST', '/api/v1/events/stream-token', { headers: { 'x-api-key': who.apiKey } });
  if (res.status !== 201) throw new Error(`stream-token answered ${res.status}: ${JSON.stringify(res.body)}`);
  // stream_url is relative unless PUBLIC_BASE_URL is set.
  return new URL(`${res.body.stream_url}${query}`, api.url).href;
}

async function poll(api: RunningApi, who: TestAccount): Promise<any[]> {
  const res = await call(api.url, 'GET', '/api/v1/events?limit=500', { headers: { 'x-api-key': who.apiKey } });
  return res.body.events;
}

/**
 * Opens a stream with fetch and reads it until `until` matches the text so far (or the server ends it).
 * `readToEnd` then reads on until the server ends the stream, returning what came after.
 */
async function rawStream(url: string, opts: { headers?: Record<string, string>; until?: RegExp; maxMs?: number } = {}) {
  const abort = new AbortController();
  const res = await fetch(url, { headers: opts.headers, signal: abort.signal });
  const reader = res.body?.getReader();
  const decoder = new TextDecoder();
  const read = async (stop: (text: string) => boolean, maxMs: number): Promise<string> => {
    let text = '';
    if (!reader) return text;
    const timer = setTimeout(() => abort.abort(), maxMs);
    try {
      while (!stop(text)) {
        const { value, done } = await reader.read();
        if (done) break;
        text += decoder.decode(value, { stream: true });
      }
    } catch {
      // aborted at maxMs
    } finally {
      clearTimeout(timer);
    }
    return text;
  };
  const until = opts.until;
  const text = until ? await read((t) => until.test(t), opts.maxMs ?? 10_000) : '';
  return { res, text, close: () => abort.abort(), readToEnd: (maxMs: number) => read(() => false, maxMs) };
}

describe('server-sent events', function () {
  this.timeout(60_000);
  let a: RunningApi;
  let b: RunningApi;
  const clients: StreamClient[] = [];
  const open = (url: string, opts?: ConstructorParameters<typeof StreamClient>[1]): StreamClient => {
    const c = new StreamClient(url, opts);
    clients.push(c);
    return c;
  };

  before(async () => {
    [a, b] = await sharedApis();
  });

  afterEach(() => {
    for (const c of clients.splice(0)) c.close();
  });

  it('streams events ingested on A to a client on B, in order, with the poll cursors as ids', async () => {
    const account = await createAccount(a.url);
    const client = open(await streamUrl(b, account));
    await client.until((c) => c.opens === 1);
    // Interleaved with another account's events, which must never reach this stream.
    const batch = Array.from({ length: 40 }, (_, i) => ({ account_id: i % 2 ? fakeAccountId() : account.userId, type: i % 4 ? 'message.received' : 'call.started', data: { i: i / 2 } }));
    const sent = (await ingest(a, batch)).filter((_, i) => i % 2 === 0);
    await client.until((c) => c.events.length === 20);
    await sleep(300);
    expect(client.events.map((e) => e.id)).to.deep.equal(sent.map((s) => s.cursor));
    expect(client.events).to.have.length(20);
    expect(client.events.map((e) => e.record.data.i)).to.deep.equal([...Array(20).keys()]);
    const polled = await eventually(async () => {
      const events = await poll(b, account);
      return events.length === 20 ? events : undefined;
    });
    expect(client.events.map((e) => e.record)).to.deep.equal(polled);
    expect(client.events.map((e) => e.type)).to.deep.equal(polled.map((p) => p.type));
  });

  it('resumes with Last-Event-ID: exactly the events missed while disconnected, then live ones', async () => {
    const account = await createAccount(a.url);
    const first = open(await streamUrl(b, account));
    await first.until((c) => c.opens === 1);
    const before = await ingest(a, [1, 2, 3].map((i) => ({ account_id: account.userId, type: 'call.started', data: { i } })));
    await first.until((c) => c.events.length === 3);
    first.close();
    const missed = await ingest(a, [4, 5, 6, 7].map((i) => ({ account_id: account.userId, type: 'call.ended', data: { i } })));
    const second = open(await streamUrl(a, account), { lastEventId: first.events.at(-1)!.id });
    await second.until((c) => c.events.length === 4);
    const live = await ingest(b, [{ account_id: account.userId, type: 'message.sent', data: { i: 8 } }]);
    await second.until((c) => c.events.length === 5);
    await sleep(300);
    expect(second.events.map((e) => e.id)).to.deep.equal([...missed, ...live].map((s) => s.cursor));
    expect(first.events.map((e) => e.id)).to.deep.equal(before.map((s) => s.cursor));
  });

  it('resumes from a since query parameter too, and filters by types', async () => {
    const account = await createAccount(a.url);
    const sent = await ingest(a, [
      { account_id: account.userId, type: 'call.started' },
      { account_id: account.userId, type: 'message.received' },
      { account_id: account.userId, type: 'call.ended' },
      { account_id: account.userId, type: 'message.received' },
    ]);
    const client = open(await streamUrl(b, account, `&since=${sent[0]!.cursor}&types=message.received,message.sent`));
    await client.until((c) => c.events.length === 2);
    const later = await ingest(a, [
      { account_id: account.userId, type: 'call.started' },
      { account_id: account.userId, type: 'message.sent' },
    ]);
    await client.until((c) => c.events.length === 3);
    expect(client.events.map((e) => e.id)).to.deep.equal([sent[1]!.cursor, sent[3]!.cursor, later[1]!.cursor]);
  });

  it('frames the stream: retry hint first, SSE headers, one event per id/event/data block', async () => {
    const account = await createAccount(a.url);
    const sent = await ingest(a, [{ account_id: account.userId, type: 'call.takeover', data: { agent: 'x' } }]);
    const { res, text, close } = await rawStream(await streamUrl(b, account), { headers: { 'Last-Event-ID': zeroCursorOf(sent[0]!.cursor) }, until: /event: call\.takeover[^]*\n\n/ });
    close();
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.match(/^text\/event-stream/);
    expect(res.headers.get('cache-control')).to.match(/^no-store/); // an authenticated response: never cached
    expect(res.headers.get('x-accel-buffering')).to.equal('no');
    expect(text.startsWith('retry: 3000\n\n')).to.equal(true);
    expect(text.split('\n\n')[1], 'a resume point (where it started) comes first').to.match(/^id: [^\n]+\nevent: resume\ndata: \{"cursor":"[^"]+"\}$/);
    const block = text.split('\n\n').find((b) => !b.includes('event: resume') && b.startsWith('id: '))!;
    const [id, event, data] = block.split('\n');
    expect(id).to.equal(`id: ${sent[0]!.cursor}`);
    expect(event).to.equal('event: call.takeover');
    expect(JSON.parse(data!.replace(/^data: /, ''))).to.include({ id: sent[0]!.id, type: 'call.takeover', cursor: sent[0]!.cursor });
  });

  it('mints a stream token with a session or an API key: 201 {token, expires_at, stream_url}', async () => {
    const account = await createAccount(a.url);
    for (const headers of [bearer(account.token), bearer(account.apiKey), { 'x-api-key': account.apiKey }]) {
      const res = await call(b.url, 'POST', '/api/v1/events/stream-token', { headers });
      expect(res.status).to.equal(201);
      expect(Object.keys(res.body).sort()).to.deep.equal(['expires_at', 'stream_url', 'token']);
      expect(res.body.token).to.match(/^svcst_/);
      const ttl = Date.parse(res.body.expires_at) - Date.now();
      expect(ttl).to.be.within(100_000, 121_000);
      expect(res.body.stream_url).to.equal(`/api/v1/events/stream?token=${encodeURIComponent(res.body.token)}`);
      expect(res.headers.get('cache-control')).to.equal('no-store');
    }
    expect((await call(b.url, 'POST', '/api/v1/events/stream-token')).status).to.equal(401);
    // A stream token is no credential anywhere else.
    const { token } = (await call(b.url, 'POST', '/api/v1/events/stream-token', { headers: bearer(account.token) })).body;
    expect((await call(b.url, 'GET', '/api/v1/events', { headers: bearer(token) })).status).to.equal(401);
  });

  it('refuses a missing, tampered or expired token, an API key and a JWT with a JSON 401, never a stream', async () => {
    const account = await createAccount(a.url);
    const token = new URL(await streamUrl(b, account)).searchParams.get('token')!;
    const expired = mintStreamToken(b.deps.streams.tokenKey, account.userId, new Date(Date.now() - 121_000), 120).token;
    const bad = ['', '?token=', `?token=${token.slice(0, -3)}abc`, `?token=${expired}`, `?token=${account.apiKey}`, `?token=${account.token}`];
    for (const query of bad) {
      const res = await call(b.url, 'GET', `/api/v1/events/stream${query}`);
      expect(res.status, query).to.equal(401);
      expect(res.headers.get('content-type')).to.match(/application\/json/);
      expect(res.body.error.code).to.equal('unauthorized');
    }
    // Not even with the real credential alongside in a header.
    const withHeader = await call(b.url, 'GET', `/api/v1/events/stream?token=${account.apiKey}`, { headers: bearer(account.token) });
    expect(withHeader.status).to.equal(401);
  });

  it('answers a bad types filter or cursor with a JSON 400 before streaming', async () => {
    const account = await createAccount(a.url);
    const badType = await call(b.url, 'GET', pathOf(await streamUrl(b, account, '&types=call.started,call.exploded')));
    expect(badType.status).to.equal(400);
    expect(badType.body.error.details[0].path).to.equal('types');
    const badCursor = await call(b.url, 'GET', pathOf(await streamUrl(b, account)), { headers: { 'Last-Event-ID': 'c1_garbage' } });
    expect(badCursor.status).to.equal(400);
    expect(badCursor.body.error.details[0].path).to.equal('Last-Event-ID');
  });

  it('allows 6 concurrent streams per account across A and B, refuses the 7th with 429, and frees a slot on close', async () => {
    const account = await createAccount(a.url);
    const streams: StreamClient[] = [];
    for (let i = 0; i < 6; i++) {
      const c = open(await streamUrl(i % 2 ? a : b, account));
      await c.until((s) => s.opens === 1);
      streams.push(c);
    }
    const seventh = await call(a.url, 'GET', pathOf(await streamUrl(a, account)));
    expect(seventh.status).to.equal(429);
    expect(seventh.body.error.code).to.equal('too_many_streams');
    expect(Number(seventh.headers.get('retry-after'))).to.be.greaterThan(0);
    const otherAccount = open(await streamUrl(a, await createAccount(a.url)));
    await otherAccount.until((c) => c.opens === 1);

    streams[0]!.close();
    const replacement = await eventually(async () => {
      const attempt = await rawStream(await streamUrl(b, account));
      if (attempt.res.status === 200) return attempt;
      attempt.close();
      return undefined;
    });
    replacement.close();
  });

  it('takes over a slot left by a process that died once its lease expires', async () => {
    const account = await createAccount(a.url);
    const slots = b.deps.mongo.collections.streamSlots;
    const past = new Date(Date.now() - 1000);
    await slots.insertMany(Array.from({ length: 6 }, (_, n) => ({ _id: `${account}:${n}`, account_id: account.userId, lease_id: `dead${n}`, holder: 'gone', expires_at: past })));
    const client = open(await streamUrl(a, account));
    await client.until((c) => c.opens === 1);
    expect(await slots.countDocuments({ account_id: account.userId, holder: { $ne: 'gone' } })).to.equal(1);
  });
});

describe('server-sent events over time (short-lived streams)', function () {
  this.timeout(60_000);
  let api: RunningApi;

  before(async () => {
    const env = baseTestEnv();
    api = await startTestApi({
      EVENTS_TOPIC: `${env.EVENTS_TOPIC}-short`,
      MONGO_DB: `${env.MONGO_DB}_short`,
      STREAM_DURATION_MS: '2500',
      STREAM_HEARTBEAT_MS: '400',
    });
  });

  it('sends heartbeats, closes after the duration, and the EventSource resumes by itself with no gap or duplicate', async () => {
    const account = await createAccount(api.url);
    const started = Date.now();
    const { res, text } = await rawStream(await streamUrl(api, account), { until: /(?!)/, maxMs: 8000 });
    expect(res.status).to.equal(200);
    expect(Date.now() - started, 'the server ends the stream after STREAM_DURATION_MS').to.be.within(2000, 6000);
    expect(text.match(/: heartbeat\n\n/g)?.length ?? 0).to.be.at.least(3);
    // ...and released the slot.
    await eventually(async () => ((await api.deps.mongo.collections.streamSlots.countDocuments({ account_id: account.userId })) === 0 ? true : undefined));

    const client = new StreamClient(await streamUrl(api, account));
    try {
      await client.until((c) => c.opens === 1);
      const sent: string[] = [];
      // Emit across at least one server-side close and reconnect (retry: 3000).
      for (let i = 0; i < 12; i++) {
        sent.push(...(await ingest(api, [{ account_id: account.userId, type: 'message.received', data: { i } }])).map((s) => s.cursor));
        await sleep(500);
      }
      await client.until((c) => c.events.length >= 12, 15_000);
      await sleep(300);
      expect(client.opens).to.be.at.least(2);
      expect(client.events.map((e) => e.id)).to.deep.equal(sent);
    } finally {
      client.close();
    }
  });
  it('gives an idle stream a resume point: events ingested while EventSource reconnects are delivered', async () => {
    const account = await createAccount(api.url);
    await ingest(api, [{ account_id: account.userId, type: 'call.started' }]); // before the stream: not for it
    const { text } = await rawStream(await streamUrl(api, account), { until: /\n\n[^]*\n\n/, maxMs: 5000 });
    expect(text, 'the stream opens with a resume point').to.match(/^retry: \d+\n\nid: [^\n]+\nevent: resume\n/);

    let reconnecting!: () => void;
    const reconnectSeen = new Promise<void>((resolve) => (reconnecting = resolve));
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const client = new StreamClient(await streamUrl(api, account), {
      beforeReconnect: async () => {
        reconnecting();
        await gate;
      },
    });
    try {
      await client.until((c) => c.opens === 1);
      // The server ends the idle stream (STREAM_DURATION_MS); while EventSource is away, events arrive.
      await reconnectSeen;
      const sent = (await ingest(api, [1, 2, 3].map((i) => ({ account_id: account.userId, type: 'message.received', data: { i } })))).map((e) => e.cursor);
      release();
      await client.until((c) => c.events.length >= 3, 15_000).catch(() => undefined);
      expect(client.reconnects[0], 'the reconnect named a resume point').to.be.a('string');
      expect(client.events.map((e) => e.id)).to.deep.equal(sent);
    } finally {
      client.close();
    }
  });
});

describe('server-sent events for a reader that falls behind', function () {
  this.timeout(60_000);
  let api: RunningApi;

  before(async () => {
    const env = baseTestEnv();
    api = await startTestApi({ EVENTS_TOPIC: `${env.EVENTS_TOPIC}-queue`, MONGO_DB: `${env.MONGO_DB}_queue`, STREAM_QUEUE_EVENTS: '2' });
  });

  /** The id/event pairs of a stream's text, in order. */
  const blocks = (text: string) =>
    text
      .split('\n\n')
      .map((b) => ({ id: /^id: (.+)$/m.exec(b)?.[1], event: /^event: (.+)$/m.exec(b)?.[1] }))
      .filter((b): b is { id: string; event: string } => b.id !== undefined && b.event !== undefined);

  it('ends an overflowing stream with a resume point at the last event it wrote; resuming there misses nothing', async () => {
    const account = await createAccount(api.url);
    // The headers come once the stream's waiter is registered: what is ingested next reaches it live.
    const first = await rawStream(await streamUrl(api, account), { until: /^retry: \d+\n\n/, maxMs: 5000 });
    // One request: the fan-out dispatches the burst in one go, more than the stream's queue holds.
    const sent = (await ingest(api, Array.from({ length: 20 }, (_, i) => ({ account_id: account.userId, type: 'message.received', data: { i } })))).map((e) => e.cursor);
    const rest = await first.readToEnd(10_000);
    const written = blocks(first.text + rest);
    const events = written.filter((b) => b.event !== 'resume').map((b) => b.id);
    expect(events.length, 'the stream overflowed and ended before carrying every event').to.be.within(1, sent.length - 1);
    expect(events).to.deep.equal(sent.slice(0, events.length));
    const closing = written.at(-1)!;
    expect(closing.event, 'the server ends the stream with a resume point').to.equal('resume');
    expect(closing.id, 'the resume point is the last event written, not the one that overflowed').to.equal(events.at(-1));

    const resumed = await rawStream(await streamUrl(api, account), { headers: { 'last-event-id': closing.id }, until: new RegExp(`id: ${sent.at(-1)}\n`), maxMs: 10_000 });
    resumed.close();
    const replayed = blocks(resumed.text).filter((b) => b.event !== 'resume').map((b) => b.id);
    expect([...events, ...replayed], 'every event exactly once across the reconnect').to.deep.equal(sent);
  });
});

function pathOf(url: string): string {
  const u = new URL(url);
  return u.pathname + u.search;
}

/** A cursor just before the given one (same partition, offset - 1), to replay exactly that event. */
function zeroCursorOf(cursor: string): string {
  const [partition, offset] = Buffer.from(cursor.slice(3), 'base64url').toString().split('.');
  return 'c1_' + Buffer.from(`${partition}.${BigInt(offset!) - 1n}`).toString('base64url');
}
