import { expect } from 'chai';
import { createAccount } from '../../../api/test/support/accounts.js';
import { ingest } from '../../../api/test/support/events.js';
import { eventually } from '../../../shared/test/support/wait.js';
import { EventPlatform, type EventRecord, type ListenOptions, type ReconnectInfo, type Transport } from '../src/index.js';
import { RestartableApi } from './support.js';

/** Runs a listen loop in the background, collecting what it yields. */
function collect(client: EventPlatform, opts: ListenOptions): { events: EventRecord[]; reconnects: ReconnectInfo[]; transports: Transport[]; stop: () => Promise<void> } {
  const controller = new AbortController();
  const events: EventRecord[] = [];
  const reconnects: ReconnectInfo[] = [];
  const transports: Transport[] = [];
  const done = (async () => {
    for await (const event of client.events.listen({ ...opts, signal: controller.signal, onReconnect: (r) => reconnects.push(r), onTransport: (t) => transports.push(t), maxReconnectDelayMs: 500 })) {
      events.push(event);
    }
  })();
  return {
    events,
    reconnects,
    transports,
    stop: async () => {
      controller.abort();
      await done;
    },
  };
}

describe('client: events.listen resumes without a gap or a repeat', function () {
  this.timeout(180_000);
  // The API the listener reads (stopped and restarted), with short streams so the server ends several.
  const reader = new RestartableApi({ INSTANCE_ID: 'client-reader', STREAM_DURATION_MS: '2000', STREAM_HEARTBEAT_MS: '500' });
  // Another process on the same topic and database: it takes the events while the reader is down.
  const writer = new RestartableApi({ INSTANCE_ID: 'client-writer', MAX_STREAMS_PER_ACCOUNT: '1' });

  before(async () => {
    await Promise.all([reader.start(), writer.start()]);
  });

  for (const transport of ['sse', 'long-poll'] as const) {
    it(`${transport}: every event exactly once, in log order, across server-ended streams and a restart of the API`, async () => {
      const account = await createAccount(reader.url);
      const emit = async (n: number, tag: string): Promise<string[]> => {
        const out = await ingest(writer.url, Array.from({ length: n }, (_, i) => ({ account_id: account.userId, type: 'message.received' as const, data: { tag, i } })));
        return out.map((e) => e.id);
      };
      const [first] = await ingest(writer.url, [{ account_id: account.userId, type: 'call.started', data: {} }]);
      const httpRetries: string[] = [];
      const client = new EventPlatform({ baseUrl: reader.url, apiKey: account.apiKey, backoffBaseMs: 100, onRetry: (r) => httpRetries.push(r.reason) });
      const run = collect(client, { since: first!.cursor, transport });
      try {
        const sent = await emit(5, 'before');
        await eventually(async () => (run.events.length >= 5 ? true : undefined), 30_000);
        // Outlive at least one server-ended stream (2 s) on SSE.
        await new Promise((r) => setTimeout(r, 2500));
        await reader.stop();
        sent.push(...(await emit(5, 'while-down')));
        await reader.start();
        sent.push(...(await emit(5, 'after')));
        await eventually(async () => (run.events.length >= 15 ? true : undefined), 60_000);
        await new Promise((r) => setTimeout(r, 1000)); // a repeat would show up here
        expect(run.events.map((e) => e.id)).to.deep.equal(sent);
        // Seen by the iterator (a failed connection) or, for a short outage, by the request's own retries (long-poll).
        const failures = [...run.reconnects.filter((r) => r.reason !== 'ended').map((r) => r.reason), ...httpRetries];
        expect(failures, 'the listener saw the API go away').to.not.deep.equal([]);
        if (transport === 'sse') expect(run.reconnects.some((r) => r.reason === 'ended'), 'the server ended a stream').to.equal(true);
        expect(run.transports, 'no transport change').to.deep.equal([]);
      } finally {
        await run.stop();
      }
    });
  }

  it('with types: only those, and the first event after `since`', async () => {
    const account = await createAccount(writer.url);
    const [start] = await ingest(writer.url, [{ account_id: account.userId, type: 'call.started', data: {} }]);
    const client = new EventPlatform({ baseUrl: writer.url, apiKey: account.apiKey });
    const run = collect(client, { since: start!.cursor, types: ['call.ended'] });
    try {
      const sent = await ingest(writer.url, [
        { account_id: account.userId, type: 'call.started', data: { n: 1 } },
        { account_id: account.userId, type: 'call.ended', data: { n: 2 } },
        { account_id: account.userId, type: 'message.sent', data: { n: 3 } },
        { account_id: account.userId, type: 'call.ended', data: { n: 4 } },
      ]);
      await eventually(async () => (run.events.length >= 2 ? true : undefined), 30_000);
      await new Promise((r) => setTimeout(r, 500));
      expect(run.events.map((e) => e.id)).to.deep.equal([sent[1]!.id, sent[3]!.id]);
      expect(run.events.every((e) => e.type === 'call.ended')).to.equal(true);
    } finally {
      await run.stop();
    }
  });

  it('falls back to long-poll when the account has no stream left (429 too_many_streams) and still misses nothing', async () => {
    const account = await createAccount(writer.url);
    const [start] = await ingest(writer.url, [{ account_id: account.userId, type: 'call.started', data: {} }]);
    const client = new EventPlatform({ baseUrl: writer.url, apiKey: account.apiKey });
    // The writer allows one stream per account: this one takes it (opened before the second starts, so the order is not a race).
    let holderOpen = false;
    const holder = collect(client, { since: start!.cursor, transport: 'sse', onOpen: () => (holderOpen = true) });
    await eventually(async () => (holderOpen ? true : undefined));
    const second = collect(client, { since: start!.cursor });
    try {
      const sent = (await ingest(writer.url, Array.from({ length: 4 }, (_, i) => ({ account_id: account.userId, type: 'message.sent' as const, data: { i } })))).map((e) => e.id);
      await eventually(async () => (holder.events.length >= 4 && second.events.length >= 4 ? true : undefined), 30_000);
      await new Promise((r) => setTimeout(r, 500));
      expect(holder.events.map((e) => e.id)).to.deep.equal(sent);
      expect(second.events.map((e) => e.id)).to.deep.equal(sent);
      expect(second.transports).to.deep.equal(['long-poll']);
      expect(holder.transports).to.deep.equal([]);
    } finally {
      await Promise.all([holder.stop(), second.stop()]);
    }
  });

  it('mints a new stream token when the stream refuses one (401), and reads on from where it was', async () => {
    const account = await createAccount(writer.url);
    const [start] = await ingest(writer.url, [{ account_id: account.userId, type: 'call.started', data: {} }]);
    const streamUrls: string[] = [];
    const client = new EventPlatform({
      baseUrl: writer.url,
      apiKey: account.apiKey,
      // The first stream request carries a tampered token, as an expired or foreign one would be.
      fetch: (input, init) => {
        const url = new URL(String(input));
        if (url.pathname === '/api/v1/events/stream') {
          if (streamUrls.length === 0) url.searchParams.set('token', url.searchParams.get('token')!.slice(0, -2) + 'xx');
          streamUrls.push(url.searchParams.get('token')!);
        }
        return fetch(url, init);
      },
    });
    const mints: string[] = [];
    const seen: string[] = [];
    const sent = await ingest(writer.url, [1, 2].map((i) => ({ account_id: account.userId, type: 'call.ended' as const, data: { i } })));
    for await (const event of client.events.listen({ since: start!.cursor, transport: 'sse', onOpen: () => mints.push('open') })) {
      seen.push(event.id);
      if (seen.length === 2) break;
    }
    expect(seen).to.deep.equal(sent.map((e) => e.id));
    expect(streamUrls).to.have.length(2);
    expect(streamUrls[1]).to.not.equal(streamUrls[0]);
    expect(mints).to.deep.equal(['open']);
  });

  it('stops cleanly when the caller breaks out of the loop', async () => {
    const account = await createAccount(writer.url);
    const [start] = await ingest(writer.url, [{ account_id: account.userId, type: 'call.started', data: {} }]);
    await ingest(writer.url, [1, 2, 3].map((i) => ({ account_id: account.userId, type: 'call.ended' as const, data: { i } })));
    const client = new EventPlatform({ baseUrl: writer.url, apiKey: account.apiKey });
    const seen: number[] = [];
    for await (const event of client.events.listen({ since: start!.cursor })) {
      seen.push(event.data.i as number);
      if (seen.length === 2) break;
    }
    expect(seen).to.deep.equal([1, 2]);
    // The stream slot is given back: a new stream on this one-stream-per-account process opens
    // (once the server has seen the socket close: on a loaded machine that can take a moment).
    const again = await eventually(async () => {
      const got: number[] = [];
      try {
        for await (const event of client.events.listen({ since: start!.cursor, transport: 'sse' })) {
          got.push(event.data.i as number);
          if (got.length === 3) break;
        }
      } catch (err) {
        if (err instanceof Error && /too_many_streams/.test(err.message)) return undefined;
        throw err;
      }
      return got;
    });
    expect(again).to.deep.equal([1, 2, 3]);
  });
});
