/**
 * A slow or hostile DNS server behind one tenant's webhook host must not hold
 * up anyone else's deliveries. The delivery process resolves with c-ares
 * (shared/src/dns.ts): a query waiting for an answer holds no thread. Under
 * dns.lookup every such lookup held one of libuv's 4 threads for as long as
 * the server took, so four hostile names stopped every connection.
 *
 * The DNS here is a real server on loopback (shared/test/support/dns-server.ts)
 * the process is pointed at by configuration (DNS_SERVERS), no fake resolver.
 */
import { expect } from 'chai';
import { DnsServer } from '#test-support/dns-server.js';
import { baseTestEnv } from '#test-support/env.js';
import { Receiver } from '#test-support/receiver.js';
import { holdThreadpool, within } from '#test-support/threadpool.js';
import { deliveryTestEnv, envelope, newAccountId, startTestDelivery, TestDb, TestLog, waitForGroup } from './support/delivery.js';

/** More hostile names than libuv has threads (4). */
const HOSTILE_NAMES = 6;

describe('webhook delivery with a slow DNS server', function () {
  this.timeout(90_000);
  let receiver: Receiver;
  let dns: DnsServer;
  let log: TestLog;
  let db: TestDb;

  before(async function () {
    this.timeout(120_000);
    receiver = await Receiver.start();
    // Hostile names answer after 30 s (or when the test releases them).
    dns = await DnsServer.start({ holdMs: 30_000 });
    dns.set('healthy.webhooks.test', ['127.0.0.1']).set('meta.webhooks.test', ['169.254.169.254']);
    for (let i = 0; i < HOSTILE_NAMES; i++) dns.slow(`slow-${i}.webhooks.test`, ['127.0.0.1']);
    const base = baseTestEnv();
    const env = deliveryTestEnv(receiver.caFile, {
      // Its own topic and database: no other test's worker (with another DNS) takes these deliveries.
      EVENTS_TOPIC: `${base.EVENTS_TOPIC}-slowdns`,
      MONGO_DB: `${base.MONGO_DB}_slowdns`,
      DNS_SERVERS: dns.address,
      DNS_TIMEOUT_MS: '45000',
    });
    await startTestDelivery(env);
    await waitForGroup(env);
    log = new TestLog(env);
    db = new TestDb(env);
  });
  after(async () => {
    dns.release();
    await receiver.close();
    await dns.close();
  });

  it("delivers a healthy subscription's events while other tenants' hosts take 30 s to resolve", async () => {
    const hostile = Array.from({ length: HOSTILE_NAMES }, (_, i) => ({ account: newAccountId(), i }));
    await Promise.all(hostile.map((h) => db.subscribe(h.account, `https://slow-${h.i}.webhooks.test:${receiver.port}/slow-${h.i}`, ['*'])));
    await log.publish(hostile.map((h) => envelope(h.account, 'call.started')));
    // Every hostile name is being looked up (and not answered) before the healthy events go out.
    await db.until(async () => hostile.every((h) => dns.names().includes(`slow-${h.i}.webhooks.test`)), 20_000, 'the hostile lookups to reach the DNS server');
    expect(dns.holding).to.be.at.least(HOSTILE_NAMES);

    const healthy = newAccountId();
    await db.subscribe(healthy, `https://healthy.webhooks.test:${receiver.port}/healthy`, ['*']);
    const events = Array.from({ length: 5 }, () => envelope(healthy, 'message.received'));
    await log.publish(events);
    const got = await receiver.waitFor('/healthy', events.length, 20_000);
    expect(got.map((r) => r.body.id).sort()).to.deep.equal(events.map((e) => e.id).sort());

    // All of that happened while the hostile lookups were still unanswered.
    expect(dns.holding, 'hostile queries still held by the DNS server').to.be.at.least(HOSTILE_NAMES);
    for (const h of hostile) expect(receiver.received(`/slow-${h.i}`)).to.have.length(0);
  });

  it('records a name that resolves inside as blocked, naming the rule but not the address', async () => {
    const account = newAccountId();
    const sub = await db.subscribe(account, `https://meta.webhooks.test:${receiver.port}/meta`, ['*']);
    await log.publish([envelope(account, 'call.started')]);
    const [attempt] = await db.until(async () => {
      const list = await db.attempts(sub._id);
      return list.length > 0 ? list : null;
    }, 20_000, 'an attempt to meta.webhooks.test');
    expect(attempt.outcome).to.equal('blocked_address');
    expect(attempt.error).to.match(/resolves to a private or internal address/);
    expect(attempt.error).to.not.match(/169\.254/);
    const stored = await db.until(async () => ((await db.webhook(sub._id))?.last_error ? db.webhook(sub._id) : null), 20_000, 'last_error');
    expect(stored!.last_error).to.equal('blocked_address');
    expect(receiver.received('/meta')).to.have.length(0);
  });

  it('delivers while every threadpool thread is held (resolving and connecting never queue for the pool)', async () => {
    const account = newAccountId();
    await db.subscribe(account, `https://healthy.webhooks.test:${receiver.port}/pool`, ['*']);
    const pool = await holdThreadpool();
    let got: unknown;
    try {
      await log.publish([envelope(account, 'call.started')]);
      got = await within(receiver.waitFor('/pool', 1, 20_000), 15_000);
      expect(pool.free(), 'the threadpool was held during the delivery').to.equal(false);
    } finally {
      await pool.release();
    }
    expect(got, 'the delivery waited for the threadpool').to.not.equal('waiting');
  });
});
