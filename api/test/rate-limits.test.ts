import { expect } from 'chai';
import net from 'node:net';
import type { CommandStartedEvent } from 'mongodb';
import { AppError } from '#shared/errors/index.js';
import { createLogger } from '#shared/log.js';
import { createMongo, ensureIndexes } from '#shared/mongo/index.js';
import { baseTestEnv, uniqueName } from '#test-support/env.js';
import { SharedLimiter } from '../src/features/limits/limiter.js';
import { sweepExpiredWindows } from '../src/features/limits/window-store.js';
import type { RunningApi } from '../src/server.js';
import { bearer, createAccount } from './support/accounts.js';
import { call, startTestApi, testApiConfig } from './support/api.js';

/** A database of its own, so counters of other tests (all from 127.0.0.1) do not leak in. */
const ownDb = (): string => `${baseTestEnv().MONGO_DB}_${uniqueName('rl').replace('-', '_')}`;

const signupBody = (): Record<string, string> => ({ email: `${uniqueName('rl')}@example.com`, name: 'Limited', password: 'limited-password' });

function expectThrottled(res: { status: number; headers: Headers; body: any }, maxRetryAfter: number): number {
  expect(res.status, JSON.stringify(res.body)).to.equal(429);
  expect(res.body.error.code).to.equal('rate_limited');
  const retryAfter = Number(res.headers.get('retry-after'));
  expect(retryAfter).to.be.within(1, maxRetryAfter);
  return retryAfter;
}

/**
 * Windows are aligned to the clock (a per-minute budget refills at each full
 * minute): a test that counts a budget out waits, if need be, until the
 * current window has `room` seconds left, so it cannot straddle two windows.
 */
async function roomInWindow(seconds: number, room: number): Promise<void> {
  const left = seconds * 1000 - (Date.now() % (seconds * 1000));
  if (left < room * 1000) await new Promise((r) => setTimeout(r, left + 50));
}

describe('rate limits shared through MongoDB', function () {
  this.timeout(120_000);

  describe('API keys: 100 per minute per key, exact mode (RATE_LIMIT_FLUSH_MS=0)', () => {
    let a: RunningApi;
    let b: RunningApi;

    before(async () => {
      // Two processes on one database, with the production budget, every request written (no local counting).
      const MONGO_DB = ownDb();
      const env = { MONGO_DB, API_KEY_LIMIT_PER_MINUTE: '100', SESSION_LIMIT_PER_MINUTE: '600', RATE_LIMIT_FLUSH_MS: '0' };
      [a, b] = await Promise.all([startTestApi({ ...env, INSTANCE_ID: 'rl-a' }), startTestApi({ ...env, INSTANCE_ID: 'rl-b' })]);
    });

    it('answers the 101st request within a minute with 429, counting both processes together', async () => {
      const acct = await createAccount(a.url);
      const other = await createAccount(b.url);
      await roomInWindow(60, 20);
      for (let i = 1; i <= 100; i++) {
        const res = await call(i % 2 ? a.url : b.url, 'GET', '/api/auth/me', { headers: { 'x-api-key': acct.apiKey } });
        expect(res.status, `request ${i}: ${JSON.stringify(res.body)}`).to.equal(200);
        expect(res.headers.get('ratelimit-limit')).to.equal('100');
        expect(res.headers.get('ratelimit-remaining')).to.equal(String(100 - i));
      }
      for (const api of [a, b]) {
        const res = await call(api.url, 'GET', '/api/auth/me', { headers: bearer(acct.apiKey) });
        expectThrottled(res, 60);
        expect(res.headers.get('ratelimit-limit')).to.equal('100');
        expect(res.headers.get('ratelimit-remaining')).to.equal('0');
        expect(Number(res.headers.get('ratelimit-reset'))).to.equal(Number(res.headers.get('retry-after')));
      }
      // Another account's key has its own budget.
      const unaffected = await call(a.url, 'GET', '/api/auth/me', { headers: { 'x-api-key': other.apiKey } });
      expect(unaffected.status).to.equal(200);
      expect(unaffected.headers.get('ratelimit-remaining')).to.equal('99');
      // Session traffic of the same account is counted separately (600 per minute).
      const session = await call(b.url, 'GET', '/api/auth/me', { headers: bearer(acct.token) });
      expect(session.status).to.equal(200);
      expect(session.headers.get('ratelimit-limit')).to.equal('600');
      // Rotating does not refill the budget: it belongs to the account's key.
      const rotated = await call(a.url, 'POST', '/api/auth/api-key', { headers: bearer(acct.token) });
      expect(rotated.status).to.equal(201);
      expectThrottled(await call(b.url, 'GET', '/api/auth/me', { headers: { 'x-api-key': rotated.body.api_key } }), 60);
    });
  });

  describe('API keys counted locally and flushed in batches (the default)', () => {
    /** What `api` sent to the rate_limits collection while `fn` ran. */
    async function windowWrites<T>(apis: RunningApi[], fn: () => Promise<T>): Promise<{ result: T; writes: number }> {
      let writes = 0;
      const count = (e: CommandStartedEvent): void => {
        if (e.commandName === 'findAndModify' && e.command.findAndModify === 'rate_limits') writes++;
      };
      for (const api of apis) api.deps.mongo.client.on('commandStarted', count);
      try {
        return { result: await fn(), writes };
      } finally {
        for (const api of apis) api.deps.mongo.client.off('commandStarted', count);
      }
    }

    it('refuses a burst spread over two processes at the limit plus at most 2 × 5 (processes × 5% of the budget), refusing the rest without writes', async function () {
      this.timeout(240_000);
      // No timer flush within the test, so every write is one a request made and no two writes of the
      // window overlap (FerretDB loses simultaneous $inc of one document): the processes carry their
      // unflushed local admissions the whole time, the worst case of the bound.
      const MONGO_DB = ownDb();
      const env = { MONGO_DB, API_KEY_LIMIT_PER_MINUTE: '100', RATE_LIMIT_FLUSH_MS: '60000', MONGO_SLOW_MS: '600000' };
      const [a, b] = await Promise.all([startTestApi({ ...env, INSTANCE_ID: 'rl-la' }), startTestApi({ ...env, INSTANCE_ID: 'rl-lb' })]);
      try {
        const acct = await createAccount(a.url);
        await roomInWindow(60, 20);
        const window = Math.floor(Date.now() / 60_000);
        const statuses: number[] = [];
        const { writes } = await windowWrites([a, b], async () => {
          for (let i = 0; i < 120; i++) {
            const res = await call(i % 2 ? b.url : a.url, 'GET', '/api/auth/me', { headers: { 'x-api-key': acct.apiKey } });
            statuses.push(res.status);
            if (res.status === 200) {
              expect(res.headers.get('ratelimit-limit')).to.equal('100');
              expect(Number(res.headers.get('ratelimit-remaining'))).to.be.within(0, 99);
            } else {
              expectThrottled(res, 60);
              expect(res.headers.get('ratelimit-remaining')).to.equal('0');
            }
          }
        });
        expect(Math.floor(Date.now() / 60_000), 'the burst fitted in one window').to.equal(window);
        const admitted = statuses.filter((s) => s === 200).length;
        expect(admitted, 'the budget, plus at most 5 unflushed per process').to.be.within(100, 110);
        expect(statuses.slice(112), 'once both processes know the window is spent, everything is refused').to.deep.equal(Array(8).fill(429));
        expect(writes, 'about one write per 6 requests until the window is spent, none after').to.be.below(50);
      } finally {
        await Promise.all([a.close(), b.close()]);
      }
    });

    it('writes a run of requests of one key within one flush interval once, and every admitted request reaches the store', async () => {
      const MONGO_DB = ownDb();
      const api = await startTestApi({ MONGO_DB, API_KEY_LIMIT_PER_MINUTE: '10000', RATE_LIMIT_FLUSH_MS: '60000', MONGO_SLOW_MS: '600000' });
      try {
        const acct = await createAccount(api.url);
        await roomInWindow(60, 20);
        const { writes } = await windowWrites([api], async () => {
          for (let i = 0; i < 60; i++) expect((await call(api.url, 'GET', '/api/auth/me', { headers: { 'x-api-key': acct.apiKey } })).status).to.equal(200);
        });
        // The window's first request is written; the other 59 are admitted locally (5% of 10000 may be unconfirmed).
        expect(writes).to.equal(1);
        // The flush writes what was admitted locally: the window ends up counting all 60.
        await api.deps.limits.apiKey.flush();
        const windows = await api.deps.mongo.collections.rateLimits.find({ key: `apikey:${acct.userId}` }).toArray();
        expect(windows.map((w) => w.points)).to.deep.equal([60]);
      } finally {
        await api.close();
      }
    });
  });

  it('limits session-token traffic per user', async () => {
    const api = await startTestApi({ MONGO_DB: ownDb(), SESSION_LIMIT_PER_MINUTE: '3' });
    try {
      const acct = await createAccount(api.url, { withApiKey: false });
      await roomInWindow(60, 10);
      for (let i = 0; i < 3; i++) expect((await call(api.url, 'GET', '/api/auth/me', { headers: bearer(acct.token) })).status).to.equal(200);
      expectThrottled(await call(api.url, 'GET', '/api/auth/me', { headers: bearer(acct.token) }), 60);
    } finally {
      await api.close();
    }
  });

  describe('signup: 10 per hour per client IP', () => {
    it('throttles the 11th signup from one IP, and a forged X-Forwarded-For does not help', async () => {
      const api = await startTestApi({ MONGO_DB: ownDb(), SIGNUP_LIMIT_PER_HOUR: '10' });
      try {
        await roomInWindow(3600, 30);
        // Rejected bodies do not spend the budget.
        expect((await call(api.url, 'POST', '/api/auth/signup', { body: { email: 'bad' } })).status).to.equal(400);
        for (let i = 1; i <= 10; i++) {
          const res = await call(api.url, 'POST', '/api/auth/signup', { body: signupBody(), headers: { 'x-forwarded-for': `198.51.100.${i}` } });
          expect(res.status, `signup ${i}: ${JSON.stringify(res.body)}`).to.equal(201);
        }
        const eleventh = await call(api.url, 'POST', '/api/auth/signup', { body: signupBody() });
        // Windows are aligned to the clock: the budget comes back at the next full hour.
        const toNextHour = Math.ceil((3_600_000 - (Date.now() % 3_600_000)) / 1000);
        expect(expectThrottled(eleventh, 3600)).to.be.within(toNextHour - 2, toNextHour + 1);
        for (const xff of ['203.0.113.99', '203.0.113.98, 10.0.0.1']) {
          const spoofed = await call(api.url, 'POST', '/api/auth/signup', { body: signupBody(), headers: { 'x-forwarded-for': xff } });
          expectThrottled(spoofed, 3600);
        }
      } finally {
        await api.close();
      }
    });

    it('behind a trusted proxy counts the address the proxy wrote, not what the client prepended', async () => {
      const api = await startTestApi({ MONGO_DB: ownDb(), SIGNUP_LIMIT_PER_HOUR: '2', TRUST_PROXY: 'true' });
      try {
        const from = (xff: string) => call(api.url, 'POST', '/api/auth/signup', { body: signupBody(), headers: { 'x-forwarded-for': xff } });
        await roomInWindow(3600, 10);
        expect((await from('192.0.2.1, 198.51.100.7')).status).to.equal(201);
        expect((await from('192.0.2.2, 198.51.100.7')).status).to.equal(201);
        expectThrottled(await from('192.0.2.3, 198.51.100.7'), 3600);
        // A different client, as reported by the proxy, has its own budget.
        expect((await from('198.51.100.8')).status).to.equal(201);
      } finally {
        await api.close();
      }
    });
  });

  it('limits login attempts per client IP', async () => {
    const api = await startTestApi({ MONGO_DB: ownDb(), LOGIN_LIMIT_PER_MINUTE: '3' });
    try {
      const acct = await createAccount(api.url, { withApiKey: false });
      const attempt = (password: string) => call(api.url, 'POST', '/api/auth/login', { body: { email: acct.email, password } });
      await roomInWindow(60, 10);
      expect((await attempt('wrong-password-1')).status).to.equal(401);
      expect((await attempt('wrong-password-2')).status).to.equal(401);
      expect((await attempt(acct.password)).status).to.equal(200);
      expectThrottled(await attempt(acct.password), 60);
    } finally {
      await api.close();
    }
  });

  it('with local counting, answers 503 once a flush failed, and writes what it admitted when the store is back', async () => {
    // A TCP relay to the test server that can be cut: a real outage, as the driver sees one.
    const config = testApiConfig({ MONGO_DB: ownDb() });
    const target = new URL(config.mongo.url.replace(/^mongodb:/, 'http:'));
    const sockets = new Set<net.Socket>();
    let up = true;
    const relay = net.createServer((client) => {
      if (!up) return client.destroy();
      const server = net.connect(Number(target.port || 27017), target.hostname);
      for (const s of [client, server]) {
        sockets.add(s);
        s.on('close', () => sockets.delete(s)).on('error', () => undefined);
      }
      client.pipe(server).pipe(client);
    });
    await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
    const port = (relay.address() as net.AddressInfo).port;
    const url = new URL(config.mongo.url);
    url.host = `127.0.0.1:${port}`;
    url.searchParams.set('directConnection', 'true');
    const mongo = createMongo({ ...config, mongo: { ...config.mongo, url: url.toString() } }, { serverSelectionTimeoutMS: 500 });
    try {
      const limiter = new SharedLimiter(mongo, 'outage', 100, 60, '100 per minute', createLogger('test', 'silent'), { flushMs: 50, cap: 5 });
      await roomInWindow(60, 20);
      await limiter.consume('k'); // written
      for (let i = 0; i < 3; i++) await limiter.consume('k'); // admitted locally, owed to the store
      up = false;
      for (const s of sockets) s.destroy();
      // The flush fails; from then on no request is admitted without a write that succeeds.
      // Until the failure is known (the flush waits out server selection), requests are still
      // admitted locally and owed like the 3 above: counted here, so the total below is exact.
      let err: unknown = null;
      let admittedUntilKnown = 0;
      for (let i = 0; i < 100 && !err; i++) {
        await new Promise((r) => setTimeout(r, 100));
        err = await limiter.consume('k').then(() => null, (e: unknown) => e);
        if (!err) admittedUntilKnown += 1;
      }
      expect(err).to.be.instanceOf(AppError).and.to.include({ code: 'unavailable', status: 503 });
      expect(await limiter.consume('k').catch((e: unknown) => e)).to.include({ status: 503 });
      up = true;
      // Back: the owed local admissions go with the next write.
      let state: unknown = null;
      for (let i = 0; i < 100 && !state; i++) {
        await new Promise((r) => setTimeout(r, 100));
        state = await limiter.consume('k').catch(() => null);
      }
      expect(state).to.not.equal(null);
      await limiter.flush();
      const [window] = await mongo.collections.rateLimits.find({ key: 'outage:k' }).toArray();
      expect(window?.points, 'the first, the 3 admitted before the outage, those admitted until its failure was known, and the one after').to.equal(5 + admittedUntilKnown);
    } finally {
      await mongo.close();
      for (const s of sockets) s.destroy();
      relay.close();
    }
  });

  describe('the limiter on the test server', () => {
    it('starts a new window once the old one has ended, each window a document found by _id, ended ones swept', async () => {
      const api = await startTestApi({ MONGO_DB: ownDb() });
      try {
        const limiter = new SharedLimiter(api.deps.mongo, 'unit', 1, 1, '1 per second', api.deps.log);
        // Start just after a window boundary so both consumes fall in one window.
        await new Promise((r) => setTimeout(r, 1000 - (Date.now() % 1000) + 20));
        expect((await limiter.consume('k')).remaining).to.equal(0);
        const err = await limiter.consume('k').catch((e: unknown) => e);
        expect(err).to.be.instanceOf(AppError).and.to.include({ code: 'rate_limited', status: 429 });
        await new Promise((r) => setTimeout(r, 1200));
        expect((await limiter.consume('k')).remaining).to.equal(0);
        const windows = await api.deps.mongo.collections.rateLimits.find({ key: 'unit:k' }).sort({ expire: 1 }).toArray();
        expect(windows).to.have.length(2);
        expect(windows.map((w) => w.points)).to.deep.equal([2, 1]);
        for (const w of windows) expect(w._id).to.equal(`unit:k:${w.expire!.getTime() - 1000}`);
        expect(await sweepExpiredWindows(api.deps.mongo.collections.rateLimits, new Date(), 0)).to.equal(1);
        expect(await api.deps.mongo.collections.rateLimits.countDocuments({ key: 'unit:k' })).to.equal(1);
        const indexes = await api.deps.mongo.collections.rateLimits.indexes();
        expect(indexes.map((i) => i.name)).to.not.include('key_unique');
      } finally {
        await api.close();
      }
    });

    it('counts a burst of simultaneous requests with one write per in-flight window, admitting exactly the budget', async () => {
      const config = testApiConfig({ MONGO_DB: ownDb() });
      const mongo = createMongo({ ...config, mongo: { ...config.mongo, slowMs: 60_000 } }, { log: createLogger('test', 'silent') });
      let writes = 0;
      mongo.client.on('commandStarted', (e) => {
        if (e.commandName === 'findAndModify') writes++;
      });
      try {
        const limiter = new SharedLimiter(mongo, 'burst', 10, 60, '10 per minute', createLogger('test', 'silent'));
        await roomInWindow(60, 5);
        const results = await Promise.all(Array.from({ length: 30 }, () => limiter.consume('k').then((s) => s, (e: unknown) => e)));
        const admitted = results.filter((r): r is { remaining: number } => !(r instanceof Error));
        expect(admitted.map((r) => r.remaining).sort((x, y) => x - y)).to.deep.equal([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
        for (const r of results.filter((r) => r instanceof Error)) expect(r).to.include({ code: 'rate_limited', status: 429 });
        expect(writes, 'one write for the first request, one for all that waited on it').to.equal(2);
        const [window] = await mongo.collections.rateLimits.find({ key: 'burst:k' }).toArray();
        expect(window?.points).to.equal(30);
      } finally {
        await mongo.close();
      }
    });

    it('drops the unique key index of earlier versions, which per-window documents would collide on', async () => {
      const db = ownDb();
      const api = await startTestApi({ MONGO_DB: db });
      try {
        const windows = api.deps.mongo.collections.rateLimits;
        await windows.createIndex({ key: 1 }, { name: 'key_unique', unique: true });
        await ensureIndexes(api.deps.mongo, api.deps.log);
        expect((await windows.indexes()).map((i) => i.name)).to.not.include('key_unique');
        await ensureIndexes(api.deps.mongo, api.deps.log); // and again, with nothing to drop
      } finally {
        await api.close();
      }
    });

    it('answers 503, not a crash or a free pass, when MongoDB is unreachable', async () => {
      const config = testApiConfig({ MONGO_URL: 'mongodb://127.0.0.1:9/' });
      const mongo = createMongo(config, { serverSelectionTimeoutMS: 300 });
      try {
        const limiter = new SharedLimiter(mongo, 'down', 5, 60, '5 per minute', createLogger('test', 'silent'));
        const err = await limiter.consume('k').catch((e: unknown) => e);
        expect(err).to.be.instanceOf(AppError).and.to.include({ code: 'unavailable', status: 503 });
        expect((err as AppError).headers).to.have.property('Retry-After');
      } finally {
        await mongo.close();
      }
    });
  });
});
