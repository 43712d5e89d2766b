import { expect } from 'chai';
import { DnsServer } from '../test/support/dns-server.js';
import { DEFAULT_DNS_CONFIG, DnsResolver, LOOKUP_LIMIT, type DnsConfig } from './dns.js';

/** A real DNS server on loopback, and resolvers pointed at it. */
describe('webhook DNS resolver (c-ares against a DNS server on loopback)', function () {
  this.timeout(20_000);
  let server: DnsServer;
  const resolvers: DnsResolver[] = [];
  let clock = 0;

  const make = (over: Partial<DnsConfig> = {}): DnsResolver => {
    const r = new DnsResolver({ ...DEFAULT_DNS_CONFIG, servers: [server.address], timeoutMs: 1000, ...over }, () => clock);
    resolvers.push(r);
    return r;
  };
  const asked = (name: string): number => server.queries.filter((q) => q.name === name && q.type === 1).length;
  const failure = async (work: Promise<unknown>): Promise<{ code?: string; message: string }> => {
    try {
      await work;
    } catch (err) {
      return err as { code?: string; message: string };
    }
    throw new Error('expected a failure');
  };

  before(async () => {
    server = await DnsServer.start({ holdMs: 30_000 });
    server
      .set('hooks.dns.test', ['93.184.216.34', '93.184.216.35'], 60)
      .set('huge-ttl.dns.test', ['93.184.216.36'], 86_400)
      .set('zero-ttl.dns.test', ['93.184.216.37'], 0)
      .slow('slow.dns.test', ['93.184.216.38']);
    for (let i = 0; i < 6; i++) server.set(`n${i}.dns.test`, ['93.184.216.40']);
    for (let i = 0; i < 4; i++) server.slow(`held${i}.dns.test`, ['93.184.216.41']);
  });
  beforeEach(() => {
    clock = 1_000_000;
  });
  after(async () => {
    for (const r of resolvers) r.close();
    await server.close();
  });

  it('asks the configured server and answers every address', async () => {
    expect(await make().lookup('HOOKS.dns.test.')).to.deep.equal(['93.184.216.34', '93.184.216.35']);
    expect(asked('hooks.dns.test')).to.be.at.least(1);
  });

  it('keeps an answer for its TTL, then asks again', async () => {
    const r = make();
    await r.lookup('hooks.dns.test');
    const before = asked('hooks.dns.test');
    clock += 59_000;
    await r.lookup('hooks.dns.test');
    expect(asked('hooks.dns.test')).to.equal(before);
    clock += 2_000;
    await r.lookup('hooks.dns.test');
    expect(asked('hooks.dns.test')).to.equal(before + 1);
  });

  it('caps a long TTL and does not keep a zero TTL', async () => {
    const r = make({ maxTtlS: 10 });
    await r.lookup('huge-ttl.dns.test');
    clock += 11_000;
    await r.lookup('huge-ttl.dns.test');
    expect(asked('huge-ttl.dns.test')).to.equal(2);
    await r.lookup('zero-ttl.dns.test');
    await r.lookup('zero-ttl.dns.test');
    expect(asked('zero-ttl.dns.test')).to.equal(2);
  });

  it('keeps "no such name" for the negative TTL', async () => {
    const r = make({ negativeTtlS: 30 });
    expect(await failure(r.lookup('nx.dns.test'))).to.have.property('code', 'ENOTFOUND');
    expect(await failure(r.lookup('nx.dns.test'))).to.have.property('code', 'ENOTFOUND');
    expect(asked('nx.dns.test')).to.equal(1);
    clock += 31_000;
    await failure(r.lookup('nx.dns.test'));
    expect(asked('nx.dns.test')).to.equal(2);
  });

  it('holds at most cacheSize names, dropping the least recently used', async () => {
    const r = make({ cacheSize: 2 });
    await r.lookup('n0.dns.test');
    await r.lookup('n1.dns.test');
    await r.lookup('n0.dns.test'); // n0 used last: n1 is the one to go
    await r.lookup('n2.dns.test');
    await r.lookup('n0.dns.test');
    await r.lookup('n1.dns.test');
    expect([asked('n0.dns.test'), asked('n1.dns.test'), asked('n2.dns.test')]).to.deep.equal([1, 2, 1]);
  });

  it('gives up on a server that does not answer at DNS_TIMEOUT_MS, and sends one query for many callers', async () => {
    const r = make({ timeoutMs: 300, tries: 1 });
    const started = Date.now();
    const errors = await Promise.all([1, 2, 3].map(() => failure(r.lookup('slow.dns.test'))));
    for (const e of errors) expect(e).to.have.property('code', 'ETIMEOUT');
    expect(Date.now() - started).to.be.below(25_000); // the server would have answered after 30 s
    expect(asked('slow.dns.test')).to.equal(1);
  });

  it('refuses a lookup past the per-account cap with a clear error, other accounts unaffected', async () => {
    const r = make({ maxLookupsPerAccount: 2, timeoutMs: 5000 });
    const first = [r.lookup('held0.dns.test', { account: 'a' }), r.lookup('held1.dns.test', { account: 'a' })];
    for (const p of first) p.catch(() => undefined);
    const over = await failure(r.lookup('held2.dns.test', { account: 'a' }));
    expect(over.code).to.equal(LOOKUP_LIMIT);
    expect(over.message).to.match(/too many DNS lookups in flight for this account \(at most 2\)/);
    // Joining a query already in flight costs nothing; a cached name neither; another account has its own cap.
    const joined = r.lookup('held0.dns.test', { account: 'a' });
    joined.catch(() => undefined);
    expect(await r.lookup('n3.dns.test', { account: 'b' })).to.deep.equal(['93.184.216.40']);
    expect(r.pending).to.equal(2);
    r.close();
    for (const e of await Promise.all([...first, joined].map(failure))) expect(e.code).to.equal('ECANCELLED');
  });

  it('close() cancels queries in flight at once', async () => {
    const r = make({ timeoutMs: 20_000 });
    const p = failure(r.lookup('held3.dns.test'));
    await new Promise((res) => setTimeout(res, 50));
    const started = Date.now();
    r.close();
    expect((await p).code).to.equal('ECANCELLED');
    expect(Date.now() - started).to.be.below(5_000);
  });

  it('answers localhost with loopback without asking, and an address with itself', async () => {
    const r = make();
    expect(await r.lookup('localhost')).to.deep.equal(['127.0.0.1', '::1']);
    expect(await r.lookup('api.localhost.')).to.deep.equal(['127.0.0.1', '::1']);
    expect(await r.lookup('93.184.216.34')).to.deep.equal(['93.184.216.34']);
    expect(server.names()).to.not.include('localhost');
  });
});
