/**
 * The per-process API key cache (api/src/features/keys/cache.ts) across two
 * API processes sharing one database, as two pods would: a key confirmed
 * once is answered without a store operation, and a rotation or revocation
 * on one process is refused by the other by the time the rotating request
 * has returned, including when the other process cannot sync (its lease).
 */
import { expect } from 'chai';
import type { CommandStartedEvent } from 'mongodb';
import { bearer, createAccount } from './support/accounts.js';
import { call, startTestApi } from './support/api.js';
import type { RunningApi } from '../src/server.js';
import { ownDatabase, uniqueName } from '#test-support/env.js';

const KEY_COLLECTIONS = ['api_keys', 'api_key_hashes'];
const SYNC_COLLECTIONS = ['key_epoch', 'api_pods'];

async function until(what: string, check: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Every command a process sends to MongoDB, by collection. */
function recordCommands(api: RunningApi): { commands: CommandStartedEvent[]; on(collections: string[]): CommandStartedEvent[] } {
  const commands: CommandStartedEvent[] = [];
  api.deps.mongo.client.on('commandStarted', (e) => commands.push(e));
  return {
    commands,
    on: (collections) => commands.filter((c) => collections.includes(String(c.command[c.commandName]))),
  };
}

describe('API key cache across two processes', function () {
  this.timeout(60_000);
  let a: RunningApi;
  let b: RunningApi;

  before(async () => {
    // One database of their own (so no other test's processes are waited for); MONGO_SLOW_MS turns on command events.
    const env = { MONGO_DB: ownDatabase('keycache'), MONGO_SLOW_MS: '600000', KEY_CACHE_SYNC_MS: '100', KEY_CACHE_LEASE_MS: '1000' };
    [a, b] = await Promise.all([startTestApi({ ...env, INSTANCE_ID: uniqueName('pod-a') }), startTestApi({ ...env, INSTANCE_ID: uniqueName('pod-b') })]);
    await until('both key caches to sync', () => a.deps.keyCache.usable() && b.deps.keyCache.usable());
  });

  after(async () => {
    await Promise.all([a?.close(), b?.close()]);
  });

  it('answers a confirmed key with no key lookup, and counts the store operations of an authenticated request', async () => {
    const acct = await createAccount(a.url);
    const rec = recordCommands(b);
    expect((await call(b.url, 'GET', '/api/v1/webhooks', { headers: bearer(acct.apiKey) })).status).to.equal(200);
    expect(rec.on(KEY_COLLECTIONS), 'the first request looks the key up').to.have.length(2);

    rec.commands.length = 0;
    const requests = 50;
    const started = performance.now();
    for (let i = 0; i < requests; i += 1) {
      expect((await call(b.url, 'GET', '/api/v1/webhooks', { headers: bearer(acct.apiKey) })).status).to.equal(200);
    }
    expect(rec.on(KEY_COLLECTIONS), 'cached: no key lookups').to.have.length(0);
    // Authentication's share: key lookups, rate-limit writes (batched), and the cache's own syncs (per process, not per request).
    const auth = rec.on([...KEY_COLLECTIONS, 'rate_limits', ...SYNC_COLLECTIONS]).length;
    console.log(`      store operations for authentication: ${auth} over ${requests} requests (${(auth / requests).toFixed(2)} per request; syncs ${rec.on(SYNC_COLLECTIONS).length}, rate_limits ${rec.on(['rate_limits']).length})`);
    // Batched: one flush a second (RATE_LIMIT_FLUSH_MS) for the limits a request counts against (the account's
    // and the address's), however many requests came in that second; not one write per request.
    const flushes = Math.ceil((performance.now() - started) / 1000) + 1;
    expect(rec.on(['rate_limits']).length, 'rate-limit writes are batched').to.be.at.most(Math.min(2 * flushes, requests / 5));
  });

  it('refuses a rotated key on the other process as soon as the rotation returns, and the revoked key after it', async () => {
    const acct = await createAccount(a.url);
    // B confirms (and caches) the key.
    expect((await call(b.url, 'GET', '/api/v1/webhooks', { headers: bearer(acct.apiKey) })).status).to.equal(200);
    const rec = recordCommands(b);
    expect((await call(b.url, 'GET', '/api/v1/webhooks', { headers: bearer(acct.apiKey) })).status).to.equal(200);
    expect(rec.on(KEY_COLLECTIONS), 'B answers the key from its cache').to.have.length(0);

    const rotated = await call(a.url, 'POST', '/api/auth/api-key', { headers: bearer(acct.apiKey) });
    expect(rotated.status).to.equal(201);
    expect((await call(b.url, 'GET', '/api/v1/webhooks', { headers: bearer(acct.apiKey) })).status, 'old key on B right after the rotation').to.equal(401);
    expect((await call(a.url, 'GET', '/api/v1/webhooks', { headers: bearer(acct.apiKey) })).status, 'old key on A').to.equal(401);
    const fresh = rotated.body.api_key as string;
    expect((await call(b.url, 'GET', '/api/v1/webhooks', { headers: bearer(fresh) })).status).to.equal(200);
    expect((await call(b.url, 'GET', '/api/v1/webhooks', { headers: bearer(fresh) })).status).to.equal(200);

    expect((await call(a.url, 'DELETE', '/api/auth/api-key', { headers: bearer(fresh) })).status).to.equal(204);
    expect((await call(b.url, 'GET', '/api/v1/webhooks', { headers: bearer(fresh) })).status, 'revoked key on B right after the revocation').to.equal(401);
  });

  it('a process that cannot sync stops trusting its cache within its lease, so a rotation elsewhere still ends the old key there', async () => {
    const acct = await createAccount(a.url);
    expect((await call(b.url, 'GET', '/api/v1/webhooks', { headers: bearer(acct.apiKey) })).status).to.equal(200);
    // B is cut off from the key epoch (test hook): it neither sees the rotation nor acknowledges it.
    b.deps.keyCache.held = true;
    try {
      const rotated = await call(a.url, 'POST', '/api/auth/api-key', { headers: bearer(acct.apiKey) });
      expect(rotated.status).to.equal(201);
      // A waited for B's acknowledgement until B's lease had lapsed; B never cleared its cache, but no longer answers from it.
      expect(b.deps.keyCache.size, 'B still holds the old key').to.be.greaterThan(0);
      expect(b.deps.keyCache.usable()).to.equal(false);
      expect((await call(b.url, 'GET', '/api/v1/webhooks', { headers: bearer(acct.apiKey) })).status, 'old key on the cut-off B').to.equal(401);
      expect((await call(b.url, 'GET', '/api/v1/webhooks', { headers: bearer(rotated.body.api_key as string) })).status).to.equal(200);
    } finally {
      b.deps.keyCache.held = false;
    }
  });
});
