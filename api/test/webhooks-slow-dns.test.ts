/**
 * A slow or hostile DNS server behind the URLs one tenant subscribes must not
 * hold up logins or other tenants' webhook checks. The API resolves webhook
 * hosts with c-ares (shared/src/dns.ts): a query waiting for an answer holds
 * no libuv thread. Under dns.lookup each such lookup held a threadpool thread
 * (the pool scrypt uses for logins) for as long as the server took, and every
 * other tenant's lookup queued behind them (libuv runs at most 2 lookups at a
 * time): a healthy name queued behind six names answering after 8 s took
 * tens of seconds to resolve, against milliseconds with c-ares (docs/security.md).
 *
 * The DNS here is a real server on loopback (shared/test/support/dns-server.ts)
 * the API process is pointed at by configuration (DNS_SERVERS).
 */
import { expect } from 'chai';
import { DnsServer } from '#test-support/dns-server.js';
import { baseTestEnv } from '#test-support/env.js';
import { holdThreadpool, within } from '#test-support/threadpool.js';
import type { RunningApi } from '../src/server.js';
import { bearer, createAccount, type TestAccount } from './support/accounts.js';
import { call, startTestApi, type JsonResponse } from './support/api.js';

const CAP = 4;

describe('webhook URL checks with a slow DNS server', function () {
  this.timeout(90_000);
  let dns: DnsServer;
  let api: RunningApi;

  before(async function () {
    this.timeout(120_000);
    // Hostile names answer (with an inside address) after 30 s, or when the test releases them.
    dns = await DnsServer.start({ holdMs: 30_000 });
    dns.set('healthy.hooks.test', ['93.184.216.34']);
    for (let i = 0; i < 2 * CAP; i++) dns.slow(`slow-${i}.hostile.test`, ['10.0.0.7']);
    const base = baseTestEnv();
    api = await startTestApi({
      EVENTS_TOPIC: `${base.EVENTS_TOPIC}-slowdns`,
      MONGO_DB: `${base.MONGO_DB}_slowdns`,
      INSTANCE_ID: 'test-slow-dns',
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'false',
      DNS_SERVERS: dns.address,
      DNS_TIMEOUT_MS: '45000',
      DNS_MAX_LOOKUPS_PER_ACCOUNT: String(CAP),
    });
  });
  after(async () => {
    dns.release();
    await dns.close();
  });

  const subscribe = (acct: TestAccount, url: string): Promise<JsonResponse> =>
    call(api.url, 'POST', '/api/v1/webhooks', { headers: bearer(acct.apiKey), body: { url, events: ['*'] } });

  it("logins and other tenants' URL checks go on while hostile names take 30 s to resolve", async () => {
    const [hostileA, hostileB, healthy, ...users] = await Promise.all(Array.from({ length: 9 }, () => createAccount(api.url)));
    // 2 x CAP hostile names in flight, CAP per account: more than libuv has threads.
    let settled = 0;
    const hostile = Array.from({ length: 2 * CAP }, (_, i) =>
      subscribe(i < CAP ? hostileA! : hostileB!, `https://slow-${i}.hostile.test/in`).finally(() => settled++),
    );
    const deadline = Date.now() + 20_000;
    while (dns.names().filter((n) => n.endsWith('.hostile.test')).length < 2 * CAP) {
      if (Date.now() > deadline) throw new Error(`the hostile lookups never reached the DNS server (saw ${JSON.stringify(dns.names())})`);
      await new Promise((r) => setTimeout(r, 50));
    }

    // One more from an account at its cap: refused at once, with the cap in the message.
    const over = await subscribe(hostileA!, 'https://slow-extra.hostile.test/in');
    expect(over.status).to.equal(429);
    expect(over.body.error.message).to.match(new RegExp(`at most ${CAP}\\b`));

    // Logins (scrypt on the threadpool) and another tenant's URL check complete...
    const logins = await Promise.all(users.map((u) => call(api.url, 'POST', '/api/auth/login', { body: { email: u.email, password: u.password } })));
    for (const res of logins) expect(res.status, JSON.stringify(res.body)).to.equal(200);
    const created = await subscribe(healthy!, 'https://healthy.hooks.test/in');
    expect(created.status, JSON.stringify(created.body)).to.equal(201);

    // ...while every hostile name is still unanswered and no hostile check has finished.
    expect(dns.holding, 'hostile queries held by the DNS server').to.be.at.least(2 * CAP);
    expect(settled, 'hostile URL checks finished before the logins').to.equal(0);

    dns.release();
    for (const res of await Promise.all(hostile)) {
      // 400 when the answer came in time (an inside address), 503 if the resolver had given up.
      expect(res.status).to.be.oneOf([400, 503]);
      expect(JSON.stringify(res.body)).to.not.include('10.0.0.7');
      if (res.status === 400) expect(res.body.error.message).to.match(/resolves to a private or internal address/);
    }
  });

  it('checks a webhook URL while every threadpool thread is held (its DNS never queues for the pool)', async () => {
    const acct = await createAccount(api.url);
    const pool = await holdThreadpool();
    let res: JsonResponse | 'waiting';
    try {
      res = await within(subscribe(acct, 'https://healthy.hooks.test/pool'), 10_000);
      expect(pool.free(), 'the threadpool was held during the check').to.equal(false);
    } finally {
      await pool.release();
    }
    expect(res, 'the URL check waited for the threadpool').to.not.equal('waiting');
    expect((res as JsonResponse).status, JSON.stringify((res as JsonResponse).body)).to.equal(201);
  });
});
