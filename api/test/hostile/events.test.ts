/**
 * Hostile input to the event log: cursors of every shape, huge `limit`,
 * negative and oversized `timeout_ms`, odd `occurred_at`, and thousands of
 * long-polls opened and abandoned (no waiter may outlive its client).
 */
import net from 'node:net';
import v8 from 'node:v8';
import vm from 'node:vm';
import { expect } from 'chai';
import fc from 'fast-check';
import type { RunningApi } from '../../src/server.js';
import { bearer, createAccount, type TestAccount } from '../support/accounts.js';
import { sharedApis } from '../support/api.js';
import { hostileCursor } from './support/arbitraries.js';
import { ingestOne, mintStreamToken } from './support/fixtures.js';
import { fuzz } from './support/fuzz.js';
import { answer, describeRequest, send, type HostileAnswer, type HostileRequest } from './support/http.js';
import { assertSafe } from './support/oracle.js';
import { record } from './support/tally.js';

/**
 * Long-polls to open and abandon. Each costs a credential lookup and a rate
 * count on the test server (FerretDB manages about 60 such requests a second
 * on this machine), so `npm test` opens 1,000 and `npm run test:hostile`, the
 * full-strength run, opens 10,000.
 */
const LONG_POLLS = Number(process.env.HOSTILE_LONG_POLLS ?? 1000);
/** At most this many open at once: both ends live in this process, within its file limit. */
const WAVE = 2000;

describe('hostile: event log input', function () {
  this.timeout(120_000);
  let apis: [RunningApi, RunningApi];
  let acct: TestAccount;
  let cursor: string;
  let partitions: number;

  before(async () => {
    apis = await sharedApis();
    acct = await createAccount(apis[0].url);
    ({ cursor } = await ingestOne(apis[0], acct.userId));
    partitions = apis[0].deps.config.kafka.eventsPartitions;
  });

  async function safe(api: RunningApi, req: HostileRequest): Promise<void> {
    const res = await send(api.url, { timeoutMs: 1500, ...req });
    if (res) assertSafe(res, describeRequest(req));
  }

  it('answers any cursor safely in since (polling, long-poll, stream) and Last-Event-ID', async () => {
    const token = await mintStreamToken(apis[0], acct.apiKey);
    // Streams and waits with a real position hold the request open: fewer of those, short patience.
    const where = fc.oneof({ weight: 4, arbitrary: fc.constant('poll') }, { weight: 2, arbitrary: fc.constant('wait') }, fc.constant('stream-since'), fc.constant('stream-last-event-id'));
    await fuzz('cursors', 250, fc.tuple(where, fc.oneof(hostileCursor(partitions), fc.constant(cursor)), fc.nat()), async ([w, raw, n]) => {
      const api = apis[n % 2]!;
      const c = Buffer.from(raw, 'utf8').toString('utf8'); // lone surrogates cannot travel in a URL or header
      const enc = encodeURIComponent(c);
      if (w === 'poll') await safe(api, { method: 'GET', path: `/api/v1/events?since=${enc}`, headers: bearer(acct.apiKey) });
      else if (w === 'wait') await safe(api, { method: 'POST', path: '/api/v1/events/wait', headers: bearer(acct.apiKey), body: JSON.stringify({ since: c, timeout_ms: 0 }) });
      else if (w === 'stream-since') await safe(api, { method: 'GET', path: `/api/v1/events/stream?token=${encodeURIComponent(token)}&since=${enc}`, timeoutMs: 600 });
      else {
        const header = /^[\x20-\x7e]*$/.test(c) && c.trim() === c ? c : encodeURIComponent(c);
        await safe(api, { method: 'GET', path: `/api/v1/events/stream?token=${encodeURIComponent(token)}`, headers: { 'last-event-id': header }, timeoutMs: 600 });
      }
    });
  });

  it('refuses a limit outside 1..500 with 400 and serves the bounds', async () => {
    const poll = (limit: string): Promise<HostileAnswer> => answer(apis[0].url, { method: 'GET', path: `/api/v1/events?limit=${encodeURIComponent(limit)}`, headers: bearer(acct.apiKey) });
    const bad = ['0', '-1', '501', '1000000', '9007199254740993', '1e400', '-1e400', '1e21', '1.5', '', 'abc', 'Infinity', 'NaN', '-0', '1,2'];
    for (const limit of bad) {
      const res = await poll(limit);
      assertSafe(res, `limit=${limit}`);
      expect(res.status, `limit=${limit}: ${res.text}`).to.equal(400);
    }
    // Other spellings of an in-range number: read as that number or refused, never more than 500 events.
    const odd = ['1e2', '0x10', ' 5', '5 ', '+5', '0005'];
    for (const limit of odd) {
      const res = await poll(limit);
      assertSafe(res, `limit=${limit}`);
      if (res.status === 200) expect(res.json.events.length).to.be.at.most(500);
    }
    for (const limit of ['1', '500']) expect((await poll(limit)).status).to.equal(200);
    record('limits', 'huge and odd limit values', bad.length + odd.length + 2);
  });

  it('refuses negative, fractional and oversized timeout_ms with 400; 0 answers at once', async () => {
    const bad: unknown[] = [-1, -1e9, -0.5, 1.5, 55_001, 1e308, '100', null, true, [], {}];
    for (const timeout of bad) {
      const res = await answer(apis[1].url, { method: 'POST', path: '/api/v1/events/wait', headers: bearer(acct.apiKey), body: JSON.stringify({ timeout_ms: timeout }) });
      assertSafe(res, `timeout_ms=${JSON.stringify(timeout)}`);
      expect(res.status, `timeout_ms=${JSON.stringify(timeout)}: ${res.text}`).to.equal(400);
    }
    const res = await answer(apis[1].url, { method: 'POST', path: '/api/v1/events/wait', headers: bearer(acct.apiKey), body: JSON.stringify({ timeout_ms: 0 }), timeoutMs: 5000 });
    expect(res.status, res.text).to.equal(200);
    expect(res.json).to.include({ event: null, timed_out: true });
    record('limits', 'negative and odd timeout_ms', bad.length + 1);
  });

  it('answers any occurred_at safely at ingest, and stores what it accepted', async () => {
    const stamp = fc.oneof(
      fc.constantFrom('2016-12-31T23:59:60Z', '2020-06-30T23:59:60+00:00', '0000-01-01T00:00:00Z', '9999-12-31T23:59:59.999999999Z', '2020-01-01t00:00:00z', '2020-01-01 00:00:00Z', '2020-01-01T00:00:00+23:59', '+275760-09-13T00:00:00Z', '2020-02-30T00:00:00Z'),
      fc.date({ noInvalidDate: true }).map((d) => d.toISOString()),
      fc.string({ maxLength: 30 }),
    );
    await fuzz('ingest occurred_at', 100, stamp, async (occurredAt) => {
      const req = { method: 'POST', path: '/internal/v1/events', headers: bearer(apis[0].deps.config.ingestToken), body: JSON.stringify({ account_id: acct.userId, type: 'call.started', data: {}, occurred_at: occurredAt }) };
      const res = await answer(apis[0].url, req);
      assertSafe(res, describeRequest(req));
    });
  });

  it(`survives ${LONG_POLLS.toLocaleString('en')} long-polls opened and abandoned at any moment: every waiter is released, memory settles`, async function () {
    this.timeout(600_000);
    const target = apis[1];
    const { registry } = target.deps.events;
    const baseline = registry.size;
    await settle();
    const before = memory();
    const body = JSON.stringify({ timeout_ms: 55_000 });
    const request = `POST /api/v1/events/wait HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${acct.apiKey}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
    let peak = 0;
    const started = Date.now();
    for (let opened = 0; opened < LONG_POLLS; opened += WAVE) {
      const size = Math.min(WAVE, LONG_POLLS - opened);
      const sockets = await Promise.all(Array.from({ length: size }, () => openAndSend(target.url, request)));
      // Half hang up at a random moment in the first second (before, during or after
      // authentication); the rest once the server holds them as waiters.
      const early = sockets.slice(0, size / 2);
      const late = sockets.slice(size / 2);
      for (const s of early) setTimeout(() => s.destroy(), Math.random() * 1000);
      await until(() => registry.size - baseline >= late.length * 0.95, 300_000, 'the late half to be waiting');
      await quiet(() => registry.size, 1000);
      peak = Math.max(peak, registry.size - baseline);
      for (const s of late) s.destroy();
      // Far below the 55 s timeout: only a released waiter is gone this soon.
      await until(() => registry.size === baseline, 10_000, `every waiter to be released (${registry.size - baseline} of departed clients remain)`);
    }
    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    await settle();
    const after = memory();
    const growthMb = (after.heapUsed - before.heapUsed) / 1024 / 1024;
    console.log(`        ${LONG_POLLS} long-polls abandoned in ${seconds} s: peak ${peak} waiters, ${registry.size - baseline} left; heap ${mb(before.heapUsed)} -> ${mb(after.heapUsed)} MB, rss ${mb(before.rss)} -> ${mb(after.rss)} MB`);
    record('limits', 'long-polls opened and abandoned', LONG_POLLS, true);
    expect(registry.size).to.equal(baseline);
    expect(growthMb, 'heap growth after GC (MB)').to.be.below(64);
  });

  it('releases stream slots and waiters of streams abandoned at any moment', async function () {
    this.timeout(120_000);
    const target = apis[0];
    const { registry } = target.deps.events;
    const baseline = registry.size;
    const owners = await Promise.all([0, 1, 2].map(() => createAccount(target.url)));
    const tokens = await Promise.all(owners.flatMap((o) => Array.from({ length: 20 }, () => mintStreamToken(target, o.apiKey))));
    // 60 stream requests, 20 per account (6 may run at once), each dropped at a random moment.
    const sockets = await Promise.all(tokens.map((t) => openAndSend(target.url, `GET /api/v1/events/stream?token=${encodeURIComponent(t)} HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n`)));
    await Promise.all(sockets.map((s) => new Promise<void>((resolve) => setTimeout(() => resolve(void s.destroy()), Math.random() * 1500))));
    await until(() => registry.size === baseline, 10_000, `stream waiters to be released (${registry.size - baseline} remain)`);
    // Slots are released right after (one MongoDB delete each), long before they would expire.
    const slots = target.deps.mongo.collections.streamSlots;
    let held: number;
    const ids = owners.map((o) => o.userId);
    const deadline = Date.now() + 10_000;
    while ((held = await slots.countDocuments({ account_id: { $in: ids } })) > 0) {
      if (Date.now() > deadline) throw new Error(`${held} stream slots still held 10 s after their clients left`);
      await new Promise((r) => setTimeout(r, 100));
    }
    // Every slot is free again: each account opens its full 6 at once.
    for (const o of owners) {
      const open = await Promise.all(
        Array.from({ length: 6 }, async () => {
          const token = await mintStreamToken(target, o.apiKey);
          const ctrl = new AbortController();
          const res = await fetch(`${target.url}/api/v1/events/stream?token=${encodeURIComponent(token)}`, { signal: ctrl.signal });
          return { status: res.status, close: () => ctrl.abort() };
        }),
      );
      expect(open.map((r) => r.status), 'six streams after the abandoned ones').to.deep.equal([200, 200, 200, 200, 200, 200]);
      for (const r of open) r.close();
    }
    record('limits', 'streams opened and abandoned', tokens.length);
  });
});

function openAndSend(base: string, bytes: string): Promise<net.Socket> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: url.hostname, port: Number(url.port) }, () => {
      socket.write(bytes);
      resolve(socket);
    });
    socket.on('error', reject);
  });
}

async function until(check: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`gave up after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Resolves once `value` has not changed for `forMs`. */
async function quiet(value: () => number, forMs: number): Promise<void> {
  let last = value();
  let since = Date.now();
  while (Date.now() - since < forMs) {
    await new Promise((r) => setTimeout(r, 50));
    const now = value();
    if (now !== last) [last, since] = [now, Date.now()];
  }
}

const mb = (bytes: number): string => (bytes / 1024 / 1024).toFixed(1);

function memory(): { heapUsed: number; rss: number } {
  const { heapUsed, rss } = process.memoryUsage();
  return { heapUsed, rss };
}

/** A full GC, when the runtime lets us ask for one, after a moment for sockets to finish closing. */
async function settle(): Promise<void> {
  await new Promise((r) => setTimeout(r, 500));
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as (() => void) | undefined;
  gc?.();
  gc?.();
}
