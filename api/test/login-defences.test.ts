import { expect } from 'chai';
import { baseTestEnv, uniqueName } from '#test-support/env.js';
import { newUserId } from '../src/features/auth/service.js';
import { PasswordHasher, SCRYPT_PARAMS } from '../src/features/auth/passwords.js';
import type { RunningApi } from '../src/server.js';
import { createAccount } from './support/accounts.js';
import { call, startTestApi, type JsonResponse } from './support/api.js';

/** A database of its own, so no other test's login counters leak in. */
const ownDb = (): string => `${baseTestEnv().MONGO_DB}_${uniqueName('login').replace('-', '_')}`;

/** Windows are clock-aligned: make sure the next `room` seconds stay in one window. */
async function roomInWindow(seconds: number, room: number): Promise<void> {
  const left = seconds * 1000 - (Date.now() % (seconds * 1000));
  if (left < room * 1000) await new Promise((r) => setTimeout(r, left + 50));
}

let ip = 0;
/** Each attempt from a new client address (the apps trust one proxy hop). */
const fromNewAddress = (): Record<string, string> => ({ 'x-forwarded-for': `198.51.100.${++ip}` });

function login(api: RunningApi, email: string, password: string): Promise<JsonResponse> {
  return call(api.url, 'POST', '/api/auth/login', { body: { email, password }, headers: fromNewAddress() });
}

/** What a response tells a client: status, error code and message (the request id differs by nature). */
const visible = (res: JsonResponse): unknown => [res.status, res.body?.error?.code ?? null, res.body?.error?.message ?? null, res.headers.get('retry-after')];

describe('login defences', function () {
  this.timeout(180_000);

  describe('per-account throttle, shared by every process, whatever the address', () => {
    let a: RunningApi;
    let b: RunningApi;

    before(async () => {
      const MONGO_DB = ownDb();
      // Per-IP budget left generous: only the per-email one is under test. Window 1 hour, so a test never straddles two.
      const env = { MONGO_DB, TRUST_PROXY: 'true', LOGIN_FAILURES_PER_ACCOUNT: '3', LOGIN_ACCOUNT_WINDOW_S: '3600' };
      [a, b] = await Promise.all([startTestApi({ ...env, INSTANCE_ID: 'login-a' }), startTestApi({ ...env, INSTANCE_ID: 'login-b' })]);
    });

    it('refuses the 4th failed login for one email from 4 addresses across 2 processes, even with the right password', async () => {
      await roomInWindow(3600, 60);
      const acct = await createAccount(a.url, { withApiKey: false });
      for (let i = 0; i < 3; i++) {
        const res = await login(i % 2 ? b : a, acct.email, 'wrong-password-1');
        expect(res.status, JSON.stringify(res.body)).to.equal(401);
      }
      const blocked = await login(b, acct.email, acct.password);
      expect(blocked.status).to.equal(429);
      expect(blocked.body.error.code).to.equal('rate_limited');
      expect(blocked.body.error.message).to.match(/3 failed logins per 60 minutes for one email/);
      expect(Number(blocked.headers.get('retry-after'))).to.be.within(1, 3600);
      // Another email is not affected.
      const other = await createAccount(a.url, { withApiKey: false });
      expect((await login(b, other.email, other.password)).status).to.equal(200);
    });

    it('answers an unknown email exactly like a known one: same statuses, messages and Retry-After', async () => {
      await roomInWindow(3600, 60);
      const acct = await createAccount(a.url, { withApiKey: false });
      const unknown = `${uniqueName('nobody')}@example.com`;
      for (let i = 0; i < 5; i++) {
        const [known, absent] = await Promise.all([login(a, acct.email, 'wrong-password-2'), login(b, unknown, 'wrong-password-2')]);
        expect(visible(absent), `attempt ${i + 1}`).to.deep.equal(visible(known));
        expect(known.status).to.equal(i < 3 ? 401 : 429);
      }
    });

    it('does not count successful logins', async () => {
      await roomInWindow(3600, 60);
      const acct = await createAccount(a.url, { withApiKey: false });
      for (let i = 0; i < 2; i++) expect((await login(a, acct.email, 'wrong-password-3')).status).to.equal(401);
      for (let i = 0; i < 5; i++) expect((await login(i % 2 ? a : b, acct.email, acct.password)).status).to.equal(200);
      expect((await login(a, acct.email, 'wrong-password-3')).status).to.equal(401);
      expect((await login(b, acct.email, acct.password)).status).to.equal(429);
    });

    it('runs the KDF for an unknown email as for a wrong password', async () => {
      const acct = await createAccount(a.url, { withApiKey: false });
      const hasher = a.deps.passwords;
      const original = hasher.verify.bind(hasher);
      let derivations = 0;
      hasher.verify = (password, stored) => {
        derivations++;
        return original(password, stored);
      };
      try {
        await login(a, `${uniqueName('ghost')}@example.com`, 'whatever-password');
        expect(derivations).to.equal(1);
        await login(a, acct.email, 'whatever-password');
        expect(derivations).to.equal(2);
      } finally {
        hasher.verify = original;
      }
    });
  });

  describe('password hashes at the OWASP floor, upgraded at login', () => {
    let api: RunningApi;

    before(async () => {
      // The real default (N=2^17), not the suite's cheaper setting.
      api = await startTestApi({ MONGO_DB: ownDb(), PASSWORD_SCRYPT_N: String(SCRYPT_PARAMS.N), PASSWORD_HASH_CONCURRENCY: '2' });
    });

    it('signs up with N=2^17, r=8, p=1', async () => {
      const acct = await createAccount(api.url, { withApiKey: false });
      const doc = await api.deps.mongo.collections.users.findOne({ _id: acct.userId });
      expect(doc!.password).to.include({ algo: 'scrypt', N: 131072, r: 8, p: 1, keylen: 64 });
    });

    it('re-hashes a password stored with weaker parameters at the next successful login, and not at a failed one', async () => {
      const { users } = api.deps.mongo.collections;
      const email = `${uniqueName('legacy')}@example.com`;
      const password = 'legacy-password-1';
      const old = await new PasswordHasher({ ...SCRYPT_PARAMS, N: 16384 }).hash(password);
      const _id = newUserId();
      await users.insertOne({ _id, email, name: 'Legacy', phone: null, plan: null, password: old, created_at: new Date() });

      expect((await login(api, email, 'not-the-password')).status).to.equal(401);
      expect((await users.findOne({ _id }))!.password).to.deep.equal(old);

      const res = await login(api, email, password);
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      const upgraded = (await users.findOne({ _id }))!.password;
      expect(upgraded).to.include({ algo: 'scrypt', N: 131072, r: 8, p: 1, keylen: 64 });
      expect(upgraded.salt).to.not.equal(old.salt);
      // The new hash works, and the next login leaves it alone.
      expect((await login(api, email, password)).status).to.equal(200);
      expect((await users.findOne({ _id }))!.password).to.deep.equal(upgraded);
      expect((await login(api, email, 'not-the-password')).status).to.equal(401);
    });
  });
});
