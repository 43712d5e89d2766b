import { expect } from 'chai';
import jwt from 'jsonwebtoken';
import { uniqueName } from '#test-support/env.js';
import type { RunningApi } from '../src/server.js';
import { bearer, createAccount } from './support/accounts.js';
import { call, sharedApis, startTestApi } from './support/api.js';

const USER_FIELDS = ['id', 'email', 'name', 'phone', 'plan', 'created_at', 'api_key'];

function expectUnauthorized(res: { status: number; headers: Headers; body: any }): void {
  expect(res.status, JSON.stringify(res.body)).to.equal(401);
  expect(res.headers.get('www-authenticate')).to.equal('Bearer');
  expect(res.body.error.code).to.equal('unauthorized');
}

const freshEmail = (): string => `${uniqueName('auth')}@example.com`;

describe('accounts: signup, login, me', () => {
  let a: RunningApi;
  let b: RunningApi;

  before(async () => {
    [a, b] = await sharedApis();
  });

  it('signs up, logs in and reads the profile on either process', async () => {
    const email = freshEmail();
    const signup = await call(a.url, 'POST', '/api/auth/signup', {
      body: { email: `  ${email.toUpperCase()} `, name: '  Ada Lovelace ', password: 'analytical-engine', phone: '+44 20 7946 0018', plan: 'pro' },
    });
    expect(signup.status, JSON.stringify(signup.body)).to.equal(201);
    expect(signup.headers.get('cache-control')).to.equal('no-store');
    const { token, user } = signup.body;
    expect(user).to.have.all.keys(USER_FIELDS);
    expect(user).to.include({ email, name: 'Ada Lovelace', phone: '+44 20 7946 0018', plan: 'pro', api_key: null });
    expect(user.id).to.match(/^usr_[0-9a-f]{24}$/);
    expect(new Date(user.created_at).toISOString()).to.equal(user.created_at);
    const claims = jwt.decode(token, { complete: true })!;
    expect(claims.header.alg).to.equal('HS256');
    expect(claims.payload).to.include({ sub: user.id });

    const login = await call(b.url, 'POST', '/api/auth/login', { body: { email: ` ${email.toUpperCase()}`, password: 'analytical-engine' } });
    expect(login.status, JSON.stringify(login.body)).to.equal(200);
    expect(login.body.user).to.deep.equal(user);
    expect(login.body.token).to.be.a('string');

    for (const [api, t] of [[a, token], [b, login.body.token]] as const) {
      const me = await call(api.url, 'GET', '/api/auth/me', { headers: bearer(t) });
      expect(me.status).to.equal(200);
      expect(me.body).to.deep.equal({ user });
    }
  });

  it('stores a scrypt hash, never the password', async () => {
    const acct = await createAccount(a.url, { withApiKey: false });
    const doc = await a.deps.mongo.collections.users.findOne({ _id: acct.userId });
    expect(doc).to.not.equal(null);
    expect(doc!.password).to.include({ algo: 'scrypt', N: 16384, r: 8, p: 1, keylen: 64 });
    expect(JSON.stringify(doc)).to.not.include(acct.password);
  });

  it('accepts the signup body shape at login and ignores name, phone and plan', async () => {
    const acct = await createAccount(a.url, { withApiKey: false, plan: 'free' });
    const res = await call(a.url, 'POST', '/api/auth/login', {
      body: { email: acct.email, password: acct.password, name: 'Someone Else', phone: '+1 555 0100', plan: 'enterprise' },
    });
    expect(res.status).to.equal(200);
    expect(res.body.user).to.include({ plan: 'free', name: 'Test User', phone: null });
  });

  it('answers a wrong password and an unknown email with the same 401', async () => {
    const acct = await createAccount(a.url, { withApiKey: false });
    const wrongPassword = await call(a.url, 'POST', '/api/auth/login', { body: { email: acct.email, password: `${acct.password}x` } });
    const unknownEmail = await call(a.url, 'POST', '/api/auth/login', { body: { email: freshEmail(), password: acct.password } });
    for (const res of [wrongPassword, unknownEmail]) expectUnauthorized(res);
    expect(wrongPassword.body.error.message).to.equal(unknownEmail.body.error.message);
    expect(wrongPassword.body).to.not.have.nested.property('error.details');
  });

  it('refuses a second signup with the same email, whatever its case', async () => {
    const acct = await createAccount(a.url, { withApiKey: false });
    const res = await call(b.url, 'POST', '/api/auth/signup', { body: { email: acct.email.toUpperCase(), name: 'Twin', password: 'another-password' } });
    expect(res.status).to.equal(409);
    expect(res.body.error.code).to.equal('conflict');
  });

  it('lets exactly one of several simultaneous signups with one email win', async () => {
    const email = freshEmail();
    const results = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        call(i % 2 ? a.url : b.url, 'POST', '/api/auth/signup', { body: { email, name: `Racer ${i}`, password: 'racing-password' } }),
      ),
    );
    const statuses = results.map((r) => r.status).sort();
    expect(statuses).to.deep.equal([201, 409, 409, 409, 409, 409]);
    expect(await a.deps.mongo.collections.users.countDocuments({ email })).to.equal(1);
  });

  describe('signup validation lists every bad field', () => {
    const cases: { title: string; body: unknown; paths: string[] }[] = [
      { title: 'short password', body: { email: 'x@example.com', name: 'X', password: 'seven77' }, paths: ['password'] },
      { title: 'bad email', body: { email: 'not-an-email', name: 'X', password: 'long-enough' }, paths: ['email'] },
      { title: 'missing fields', body: {}, paths: ['email', 'name', 'password'] },
      { title: 'wrong types', body: { email: 5, name: ['x'], password: true, phone: 7, plan: {} }, paths: ['email', 'name', 'password', 'phone', 'plan'] },
      { title: 'unknown fields', body: { email: 'x@example.com', name: 'X', password: 'long-enough', role: 'admin', is_admin: true }, paths: ['role', 'is_admin'] },
      { title: 'blank name', body: { email: 'x@example.com', name: '   ', password: 'long-enough' }, paths: ['name'] },
      { title: 'implausible phone', body: { email: 'x@example.com', name: 'X', password: 'long-enough', phone: 'call me' }, paths: ['phone'] },
      { title: 'over-long password', body: { email: 'x@example.com', name: 'X', password: 'p'.repeat(257) }, paths: ['password'] },
      { title: 'a body that is not an object', body: ['x@example.com'], paths: ['body'] },
    ];
    for (const c of cases) {
      it(`rejects ${c.title} with 400`, async () => {
        const res = await call(a.url, 'POST', '/api/auth/signup', { body: c.body });
        expect(res.status, JSON.stringify(res.body)).to.equal(400);
        expect(res.body.error.code).to.equal('validation_failed');
        const paths = (res.body.error.details as { path: string }[]).map((d) => d.path);
        expect(paths).to.include.members(c.paths);
      });
    }

    it('rejects an unknown field at login too', async () => {
      const res = await call(a.url, 'POST', '/api/auth/login', { body: { email: 'x@example.com', password: 'whatever-it-is', remember: true } });
      expect(res.status).to.equal(400);
      expect(res.body.error.details).to.deep.include({ path: 'remember', message: 'is not an allowed field' });
    });

    it('accepts 8 characters exactly, and null or blank for the optional fields', async () => {
      for (const blank of [null, '', '  ']) {
        const res = await call(a.url, 'POST', '/api/auth/signup', { body: { email: freshEmail(), name: 'Min', password: '12345678', phone: blank, plan: blank } });
        expect(res.status, JSON.stringify(res.body)).to.equal(201);
        expect(res.body.user).to.include({ phone: null, plan: null });
      }
    });
  });

  describe('credentials', () => {
    it('requires a credential, and says how to send one', async () => {
      expectUnauthorized(await call(a.url, 'GET', '/api/auth/me'));
      expectUnauthorized(await call(a.url, 'GET', '/api/auth/me', { headers: { authorization: 'Basic dXNlcjpwYXNz' } }));
      expectUnauthorized(await call(a.url, 'GET', '/api/auth/me', { headers: { authorization: 'Bearer' } }));
    });

    it('refuses a stream token as a bearer credential', async () => {
      expectUnauthorized(await call(a.url, 'GET', '/api/auth/me', { headers: bearer(`svcst_${'a'.repeat(43)}`) }));
    });

    it('refuses a session token in X-API-Key', async () => {
      const acct = await createAccount(a.url, { withApiKey: false });
      expectUnauthorized(await call(a.url, 'GET', '/api/auth/me', { headers: { 'x-api-key': acct.token } }));
    });

    it('refuses two different credentials on one request', async () => {
      const acct = await createAccount(a.url);
      const other = await createAccount(a.url);
      expectUnauthorized(await call(a.url, 'GET', '/api/auth/me', { headers: { ...bearer(acct.token), 'x-api-key': other.apiKey } }));
    });
  });

  describe('token attacks', () => {
    let userId: string;
    let secret: string;
    const now = (): number => Math.floor(Date.now() / 1000);
    const claims = (): Record<string, unknown> => ({ sub: userId, iat: now() - 60, exp: now() + 3600, iss: 'event-platform', aud: 'session' });

    before(async () => {
      userId = (await createAccount(a.url, { withApiKey: false })).userId;
      secret = a.deps.config.auth.jwtSecret;
      // The control: a token built this way with the real secret is accepted.
      const ok = await call(a.url, 'GET', '/api/auth/me', { headers: bearer(jwt.sign(claims(), secret)) });
      expect(ok.status).to.equal(200);
    });

    it('refuses an expired token', async () => {
      const token = jwt.sign({ ...claims(), iat: now() - 31 * 86400, exp: now() - 86400 }, secret);
      expectUnauthorized(await call(a.url, 'GET', '/api/auth/me', { headers: bearer(token) }));
    });

    it('refuses alg none', async () => {
      const part = (v: object): string => Buffer.from(JSON.stringify(v)).toString('base64url');
      const token = `${part({ alg: 'none', typ: 'JWT' })}.${part(claims())}.`;
      expectUnauthorized(await call(a.url, 'GET', '/api/auth/me', { headers: bearer(token) }));
    });

    it('refuses a token signed with another secret', async () => {
      const token = jwt.sign(claims(), 'not-the-server-secret-0123456789abcdef');
      expectUnauthorized(await call(a.url, 'GET', '/api/auth/me', { headers: bearer(token) }));
    });

    it('refuses a tampered token and garbage', async () => {
      const [h, , s] = jwt.sign(claims(), secret).split('.');
      const other = (await createAccount(a.url, { withApiKey: false })).userId;
      const forged = Buffer.from(JSON.stringify({ ...claims(), sub: other })).toString('base64url');
      expectUnauthorized(await call(a.url, 'GET', '/api/auth/me', { headers: bearer(`${h}.${forged}.${s}`) }));
      for (const junk of ['garbage', 'a.b.c', 'svc_short', 'x'.repeat(5000)]) {
        expectUnauthorized(await call(a.url, 'GET', '/api/auth/me', { headers: bearer(junk) }));
      }
    });

    it('refuses a valid token whose account no longer exists', async () => {
      const token = jwt.sign({ ...claims(), sub: 'usr_000000000000000000000000' }, secret);
      expectUnauthorized(await call(a.url, 'GET', '/api/auth/me', { headers: bearer(token) }));
    });
  });
});

describe('accounts while MongoDB is unreachable', () => {
  it('answers 503 with Retry-After rather than failing open or crashing', async function () {
    this.timeout(40_000);
    const api = await startTestApi({ MONGO_URL: 'mongodb://127.0.0.1:9/' });
    try {
      const [signup, keyed] = await Promise.all([
        call(api.url, 'POST', '/api/auth/signup', { body: { email: freshEmail(), name: 'Offline', password: 'offline-password' } }),
        call(api.url, 'GET', '/api/auth/me', { headers: { 'x-api-key': `svc_${Buffer.alloc(32, 1).toString('base64url')}` } }),
      ]);
      for (const res of [signup, keyed]) {
        expect(res.status, JSON.stringify(res.body)).to.equal(503);
        expect(res.body.error.code).to.equal('unavailable');
        expect(res.headers.get('retry-after')).to.match(/^\d+$/);
      }
    } finally {
      await api.close();
    }
  });
});
