import { createHash } from 'node:crypto';
import { expect } from 'chai';
import type { RunningApi } from '../src/server.js';
import { bearer, createAccount } from './support/accounts.js';
import { call, sharedApis } from './support/api.js';

const KEY_SHAPE = /^svc_[A-Za-z0-9_-]{43}$/;

const me = (api: RunningApi, headers: Record<string, string>) => call(api.url, 'GET', '/api/auth/me', { headers });
const newKey = (api: RunningApi, credential: string) => call(api.url, 'POST', '/api/auth/api-key', { headers: bearer(credential) });

describe('platform API keys', () => {
  let a: RunningApi;
  let b: RunningApi;

  before(async () => {
    [a, b] = await sharedApis();
  });

  it('creates a key shown once, with its preview, and no body needed', async () => {
    const acct = await createAccount(a.url, { withApiKey: false });
    const res = await newKey(a, acct.token);
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    expect(res.headers.get('cache-control')).to.equal('no-store');
    expect(res.body).to.have.all.keys('api_key', 'preview', 'created_at');
    expect(res.body.api_key).to.match(KEY_SHAPE);
    expect(res.body.preview).to.equal(`svc_…${res.body.api_key.slice(-8)}`);
    const profile = await me(a, bearer(acct.token));
    expect(profile.body.user.api_key).to.deep.equal({ preview: res.body.preview, created_at: res.body.created_at });
    expect(JSON.stringify(profile.body)).to.not.include(res.body.api_key);
  });

  it('authenticates with the key as Bearer and as X-API-Key, on every process', async () => {
    const acct = await createAccount(a.url);
    for (const api of [a, b]) {
      for (const headers of [bearer(acct.apiKey), { 'x-api-key': acct.apiKey }]) {
        const res = await me(api, headers);
        expect(res.status, JSON.stringify(res.body)).to.equal(200);
        expect(res.body.user.id).to.equal(acct.userId);
      }
    }
  });

  it('stores only the SHA-256 of the key', async () => {
    const acct = await createAccount(a.url);
    const docs = await a.deps.mongo.collections.apiKeys.find({}).toArray();
    const mine = docs.find((d) => d._id === acct.userId);
    expect(mine).to.not.equal(undefined);
    expect(mine!.hash).to.equal(createHash('sha256').update(acct.apiKey).digest('hex'));
    const secretPart = acct.apiKey.slice(4);
    const pointers = await a.deps.mongo.collections.apiKeyHashes.find({ account_id: acct.userId }).toArray();
    expect(pointers.map((p) => p._id)).to.deep.equal([mine!.hash]);
    const everything = JSON.stringify(docs) + JSON.stringify(pointers) + JSON.stringify(await a.deps.mongo.collections.users.find({}).toArray());
    expect(everything).to.not.include(secretPart);
    expect(everything).to.not.include(secretPart.slice(0, 20));
  });

  it('rotates: the old key fails at once on every process, the new one works', async () => {
    const acct = await createAccount(a.url);
    const before = await me(b, bearer(acct.apiKey));
    expect(before.status).to.equal(200);

    const rotated = await newKey(a, acct.token);
    expect(rotated.status).to.equal(201);
    const fresh: string = rotated.body.api_key;
    expect(fresh).to.not.equal(acct.apiKey);
    expect(rotated.body.preview).to.not.equal(before.body.user.api_key.preview);

    for (const api of [a, b]) {
      const old = await me(api, { 'x-api-key': acct.apiKey });
      expect(old.status).to.equal(401);
      expect(old.headers.get('www-authenticate')).to.equal('Bearer');
      const now = await me(api, bearer(fresh));
      expect(now.status).to.equal(200);
      expect(now.body.user.api_key.preview).to.equal(rotated.body.preview);
    }
    expect(await a.deps.mongo.collections.apiKeys.countDocuments({ _id: acct.userId })).to.equal(1);
    const pointers = await a.deps.mongo.collections.apiKeyHashes.find({ account_id: acct.userId }).toArray();
    expect(pointers.map((p) => p._id)).to.deep.equal([createHash('sha256').update(fresh).digest('hex')]);
  });

  it('refuses an old key even when its hash pointer survived (a rotation cut short before removing it)', async () => {
    const acct = await createAccount(a.url);
    const rotated = await newKey(a, acct.token);
    expect(rotated.status).to.equal(201);
    const oldHash = createHash('sha256').update(acct.apiKey).digest('hex');
    await a.deps.mongo.collections.apiKeyHashes.insertOne({ _id: oldHash, account_id: acct.userId, created_at: new Date() });
    for (const api of [a, b]) expect((await me(api, bearer(acct.apiKey))).status).to.equal(401);
    expect((await me(b, bearer(rotated.body.api_key))).status).to.equal(200);
  });

  it('can be rotated with the key itself', async () => {
    const acct = await createAccount(a.url);
    const rotated = await call(b.url, 'POST', '/api/auth/api-key', { headers: { 'x-api-key': acct.apiKey } });
    expect(rotated.status).to.equal(201);
    expect((await me(a, bearer(acct.apiKey))).status).to.equal(401);
    expect((await me(a, bearer(rotated.body.api_key))).status).to.equal(200);
  });

  it('revokes: 204, then the key is refused everywhere and a second revoke is 404', async () => {
    const acct = await createAccount(a.url);
    const del = await call(a.url, 'DELETE', '/api/auth/api-key', { headers: bearer(acct.token) });
    expect(del.status).to.equal(204);
    expect(del.body).to.equal(null);
    for (const api of [a, b]) expect((await me(api, { 'x-api-key': acct.apiKey })).status).to.equal(401);
    const profile = await me(b, bearer(acct.token));
    expect(profile.body.user.api_key).to.equal(null);
    const again = await call(b.url, 'DELETE', '/api/auth/api-key', { headers: bearer(acct.token) });
    expect(again.status).to.equal(404);
    expect(again.body.error.code).to.equal('not_found');
    expect(await a.deps.mongo.collections.apiKeys.countDocuments({ _id: acct.userId })).to.equal(0);
    expect(await a.deps.mongo.collections.apiKeyHashes.countDocuments({ account_id: acct.userId })).to.equal(0);
  });

  it('refuses an account without a key on DELETE with 404', async () => {
    const acct = await createAccount(a.url, { withApiKey: false });
    const res = await call(a.url, 'DELETE', '/api/auth/api-key', { headers: bearer(acct.token) });
    expect(res.status).to.equal(404);
  });

  it('refuses key operations without credentials', async () => {
    for (const method of ['POST', 'DELETE']) {
      const res = await call(a.url, method, '/api/auth/api-key');
      expect(res.status).to.equal(401);
      expect(res.headers.get('www-authenticate')).to.equal('Bearer');
    }
  });

  it('refuses well-formed keys that were never issued, and mangled ones', async () => {
    const acct = await createAccount(a.url);
    const forged = `svc_${Buffer.alloc(32, 7).toString('base64url')}`;
    const flipped = acct.apiKey.slice(0, -1) + (acct.apiKey.endsWith('A') ? 'B' : 'A');
    for (const key of [forged, flipped, `${acct.apiKey}x`, acct.apiKey.toUpperCase(), 'svc_']) {
      const res = await me(a, { 'x-api-key': key });
      expect(res.status, key).to.equal(401);
    }
  });

  it('sends RateLimit headers on key traffic', async () => {
    const acct = await createAccount(a.url);
    const first = await me(a, { 'x-api-key': acct.apiKey });
    const second = await me(b, { 'x-api-key': acct.apiKey });
    expect(first.headers.get('ratelimit-limit')).to.equal(String(a.deps.config.limits.apiKeyPerMinute));
    const remaining = [first, second].map((r) => Number(r.headers.get('ratelimit-remaining')));
    expect(remaining[1]).to.equal(remaining[0]! - 1);
    expect(Number(first.headers.get('ratelimit-reset'))).to.be.within(1, 60);
  });
});
