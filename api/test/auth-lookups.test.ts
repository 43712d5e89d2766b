/**
 * What an authenticated request costs the store: simultaneous lookups of one
 * user share one read (the limiter's shared writes are tested in
 * rate-limits.test.ts), and an API key and its limit window are found by
 * `_id` lookups only (FerretDB, the test server, scans the collection for any
 * other filter).
 */
import { expect } from 'chai';
import type { CommandStartedEvent } from 'mongodb';
import { bearer, createAccount } from './support/accounts.js';
import { call, startTestApi } from './support/api.js';
import { findUser } from '../src/features/auth/service.js';
import { ownDatabase } from '#test-support/env.js';

describe('store operations per authenticated request', function () {
  this.timeout(60_000);

  it('shares one user read among simultaneous lookups of that user, and finds API keys and limit windows by _id', async () => {
    // MONGO_SLOW_MS turns on the driver's command events, which this test counts.
    const api = await startTestApi({ MONGO_DB: ownDatabase('lookups'), MONGO_SLOW_MS: '600000' });
    const commands: CommandStartedEvent[] = [];
    try {
      const acct = await createAccount(api.url);
      api.deps.mongo.client.on('commandStarted', (e) => commands.push(e));
      const on = (name: string, collection: string) => commands.filter((c) => c.commandName === name && c.command[name] === collection);
      // 20 lookups of one user while the first is in flight: one read, one answer for all.
      const users = await Promise.all(Array.from({ length: 20 }, () => findUser(api.deps, acct.userId)));
      expect(users.map((u) => u?._id)).to.deep.equal(Array(20).fill(acct.userId));
      expect(on('find', 'users')).to.have.length(1);
      // Once it returned, the next lookup reads again (nothing is cached).
      await findUser(api.deps, acct.userId);
      expect(on('find', 'users')).to.have.length(2);

      commands.length = 0;
      expect((await call(api.url, 'GET', '/api/v1/webhooks', { headers: bearer(acct.apiKey) })).status).to.equal(200);
      const keyReads = [...on('find', 'api_key_hashes'), ...on('find', 'api_keys')];
      expect(keyReads).to.have.length(2);
      for (const c of keyReads) expect(Object.keys(c.command.filter as object)).to.deep.equal(['_id']);
      for (const c of on('findAndModify', 'rate_limits')) expect(Object.keys(c.command.query as object)).to.deep.equal(['_id']);
    } finally {
      await api.close();
    }
  });
});
