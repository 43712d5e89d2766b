import { readFileSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { generate } from 'selfsigned';
import { failTimes, hang, Receiver, status } from '#test-support/receiver.js';
import type { Resolver } from '#shared/url-safety.js';
import { createSender, type Sender, type SendGate } from './http-sender.js';

describe('http sender (real HTTPS receiver)', () => {
  let receiver: Receiver;
  let ca: string;
  const senders: Sender[] = [];

  const make = (over: { allowPrivate?: boolean; resolve?: Resolver; caPem?: string | null; timeoutMs?: number } = {}): Sender => {
    const s = createSender({
      // The receiver's port is allowed, so the rules under test are the address rules.
      policy: { allowPrivate: over.allowPrivate ?? true, allowedPorts: [[receiver.port, receiver.port]] },
      resolve: over.resolve ?? (async () => ['127.0.0.1']),
      caPem: over.caPem === undefined ? ca : over.caPem,
      timeoutMs: over.timeoutMs ?? 4000,
      userAgent: 'test-agent/1',
    });
    senders.push(s);
    return s;
  };

  before(async () => {
    receiver = await Receiver.start();
    ca = readFileSync(receiver.caFile, 'utf8');
  });
  after(async () => {
    for (const s of senders) s.close();
    await receiver.close();
  });

  it('posts the raw body with the given headers and reports 2xx as ok', async () => {
    const res = await make().send(receiver.url('/ok'), '{"a":1}', { 'x-service-event': 'call.started' });
    expect(res).to.include({ status: 200, outcome: 'ok', error: null });
    const [got] = receiver.received('/ok');
    expect(got?.raw.toString()).to.equal('{"a":1}');
    expect(got?.headers).to.include({ 'content-type': 'application/json', 'x-service-event': 'call.started', 'user-agent': 'test-agent/1' });
  });

  it('checks the gate once the connection is up, on a new and on a reused socket, and writes nothing when it says no', async () => {
    const s = make();
    const seen: { handshakes: number; requests: number }[] = [];
    const gate = (open: boolean): SendGate => ({
      // Up: the receiver has the new connection (and the handshake is done: ready() runs after it); no request on it yet.
      ready: () => (seen.push({ handshakes: receiver.connections, requests: receiver.received('/gated').length }), open),
      refresh: async () => false,
    });
    // undici takes a connection back for the next request a moment (a setImmediate) after the
    // answer, and replaces a closed one a moment after it closed.
    const idle = (): Promise<unknown> => new Promise((r) => setTimeout(r, 20));
    const before = receiver.connections;
    expect(await s.send(receiver.url('/gated'), '{"n":1}', {}, {}, gate(false)), 'withheld on a new connection').to.equal(null);
    await idle();
    expect(await s.send(receiver.url('/gated'), '{"n":2}', {}, {}, gate(true))).to.include({ status: 200, outcome: 'ok' });
    await idle();
    expect(await s.send(receiver.url('/gated'), '{"n":3}', {}, {}, gate(false)), 'withheld on a reused connection').to.equal(null);
    expect(await s.send(receiver.url('/gated'), '{"n":4}', {}, {}, gate(true))).to.include({ status: 200, outcome: 'ok' });
    expect(receiver.received('/gated').map((r) => r.raw.toString())).to.deep.equal(['{"n":2}', '{"n":4}']);
    // A withheld request closes its connection: 1 and 2 each on a new one, 3 on 2's, 4 on a new one.
    expect(seen.map((x) => ({ handshakes: x.handshakes - before, requests: x.requests }))).to.deep.equal([
      { handshakes: 1, requests: 0 },
      { handshakes: 2, requests: 0 },
      { handshakes: 2, requests: 1 },
      { handshakes: 3, requests: 1 },
    ]);
  });

  it('reads again when the gate is not ready, then writes the request on a connection that is up, once', async () => {
    const s = make();
    let fresh = false;
    let refreshes = 0;
    const gate: SendGate = {
      ready: () => fresh,
      refresh: async (pending) => {
        expect(pending()).to.equal(true);
        refreshes++;
        await new Promise((r) => setTimeout(r, 50));
        fresh = true;
        return true;
      },
    };
    expect(await s.send(receiver.url('/refreshed'), '{"n":1}', {}, {}, gate)).to.include({ status: 200, outcome: 'ok' });
    expect(refreshes).to.equal(1);
    expect(receiver.received('/refreshed').map((r) => r.raw.toString())).to.deep.equal(['{"n":1}']);
  });

  it('rejects, writing nothing, when the gate\'s read fails: no attempt to report', async () => {
    const s = make();
    const failing: SendGate = {
      ready: () => false,
      refresh: async () => {
        throw new Error('store down');
      },
    };
    let caught: unknown = null;
    await s.send(receiver.url('/gate-throws'), '{"n":1}', {}, {}, failing).catch((err: unknown) => (caught = err));
    expect((caught as Error | null)?.message).to.equal('store down');
    expect(receiver.received('/gate-throws')).to.have.length(0);
  });

  it('tells a gate still reading when the attempt timed out without it, so it can stop', async () => {
    const s = make({ timeoutMs: 300 });
    let stoppedAt = 0;
    const slowGate: SendGate = {
      ready: () => false,
      refresh: async (pending) => {
        while (pending()) await new Promise((r) => setTimeout(r, 20));
        stoppedAt = Date.now();
        return true;
      },
    };
    const res = await s.send(receiver.url('/gate-slow'), '{}', {}, {}, slowGate);
    const settledAt = Date.now();
    expect(res).to.include({ outcome: 'timeout' });
    await new Promise((r) => setTimeout(r, 100));
    expect(stoppedAt, 'the gate saw the send end').to.be.within(settledAt - 50, settledAt + 100);
    expect(receiver.received('/gate-slow')).to.have.length(0);
  });

  it('keeps at most socketsPerOrigin connections to one receiver per subscription; the rest wait their turn', async () => {
    receiver.on('/slowish', () => ({ status: 200, delayMs: 200 }));
    const s = createSender({ policy: { allowPrivate: true, allowedPorts: [[receiver.port, receiver.port]] }, resolve: async () => ['127.0.0.1'], caPem: ca, timeoutMs: 4000, userAgent: 'x', socketsPerOrigin: 2 });
    senders.push(s);
    const before = receiver.connections;
    const results = await Promise.all(Array.from({ length: 6 }, (_, i) => s.send(receiver.url('/slowish'), `{"n":${i}}`, {})));
    expect(results.map((r) => r.outcome)).to.deep.equal(Array(6).fill('ok'));
    expect(receiver.connections - before).to.equal(2);
  });

  const withSockets = (sockets: number, timeoutMs: number, extra: { idlePoolMs?: number } = {}): Sender => {
    const s = createSender({ policy: { allowPrivate: true, allowedPorts: [[receiver.port, receiver.port]] }, resolve: async () => ['127.0.0.1'], caPem: ca, timeoutMs, userAgent: 'x', socketsPerOrigin: sockets, ...extra });
    senders.push(s);
    return s;
  };

  it('gives each subscription its own connections to an origin: one that hangs holds up no other', async () => {
    receiver.on('/shared-hang', hang);
    const s = withSockets(1, 1500);
    const hung = s.send(receiver.url('/shared-hang'), '{}', {}, { subscription: 'wh_hung' });
    await receiver.waitFor('/shared-hang', 1);
    // Same origin, another subscription: its request goes on a connection of its own at once.
    const healthy = await s.send(receiver.url('/shared-ok'), '{}', {}, { subscription: 'wh_healthy' });
    expect(healthy).to.include({ status: 200, outcome: 'ok' });
    expect(receiver.received('/shared-ok')).to.have.length(1);
    expect((await hung).outcome).to.equal('timeout');
    expect(s.pools()).to.equal(2);
  });

  it('does not count the wait for a connection against the attempt\'s time limit', async () => {
    receiver.on('/one-at-a-time', () => ({ status: 200, delayMs: 400 }));
    const s = withSockets(1, 700);
    // One connection: the second waits ~400 ms for it, then takes ~400 ms (800 in all, 400 counted).
    const [first, second] = await Promise.all([0, 1].map((n) => s.send(receiver.url('/one-at-a-time'), `{"n":${n}}`, {}, { subscription: 'wh_one' })));
    expect(first).to.include({ status: 200, outcome: 'ok' });
    expect(second).to.include({ status: 200, outcome: 'ok' });
    expect(second!.durationMs, 'the time counted: the answer, not the wait').to.be.below(700);
  });

  it('withdraws a gated request that got no connection within the limit: nothing written, nothing to report', async () => {
    receiver.on('/held', hang);
    const s = withSockets(1, 500);
    const open: SendGate = { ready: () => true, refresh: async () => true };
    // Two ahead of it on the one connection, each held for its whole limit (the second's wait is not counted).
    const ahead = [1, 2].map((n) => s.send(receiver.url('/held'), `{"n":${n}}`, {}, { subscription: 'wh_w' }));
    await receiver.waitFor('/held', 1);
    const withdrawn = await s.send(receiver.url('/held'), '{"n":3}', {}, { subscription: 'wh_w' }, open);
    expect(withdrawn, 'withdrawn unwritten').to.equal(null);
    expect((await Promise.all(ahead)).map((r) => r.outcome)).to.deep.equal(['timeout', 'timeout']);
    // The connection came free after the withdrawal: the withdrawn request was given to none.
    await new Promise((r) => setTimeout(r, 200));
    expect(receiver.received('/held').map((r) => r.raw.toString())).to.deep.equal(['{"n":1}', '{"n":2}']);
  });

  it('closes the pools of subscriptions that sent nothing for a while', async () => {
    const s = withSockets(2, 4000, { idlePoolMs: 200 });
    for (const sub of ['wh_a', 'wh_b', 'wh_c']) expect(await s.send(receiver.url('/idle'), '{}', {}, { subscription: sub })).to.include({ outcome: 'ok' });
    expect(s.pools()).to.equal(3);
    await new Promise((r) => setTimeout(r, 600));
    expect(s.pools()).to.equal(0);
    // And a new one when the subscription sends again.
    expect(await s.send(receiver.url('/idle'), '{}', {}, { subscription: 'wh_a' })).to.include({ outcome: 'ok' });
    expect(s.pools()).to.equal(1);
  });

  it('classifies 3xx (not followed), 4xx and 5xx, and reads Retry-After', async () => {
    receiver.on('/moved', status(302, { location: 'https://127.0.0.1:1/elsewhere' }));
    receiver.on('/gone', status(410));
    receiver.on('/busy', status(503, { 'retry-after': '120' }));
    const s = make();
    expect(await s.send(receiver.url('/moved'), '{}', {})).to.include({ status: 302, outcome: 'http_3xx' });
    expect(await s.send(receiver.url('/gone'), '{}', {})).to.include({ status: 410, outcome: 'http_4xx' });
    expect(await s.send(receiver.url('/busy'), '{}', {})).to.include({ status: 503, outcome: 'http_5xx', retryAfterMs: 120_000 });
    expect(receiver.received('/moved')).to.have.length(1);
  });

  it('gives up on a hanging receiver at the timeout and calls it timeout', async () => {
    receiver.on('/hang', hang);
    const res = await make({ timeoutMs: 1000 }).send(receiver.url('/hang'), '{}', {});
    expect(res).to.include({ status: null, outcome: 'timeout' });
    expect(res.durationMs).to.be.within(900, 2500);
  });

  it('refuses a resolved inside address without connecting (DNS rebinding)', async () => {
    receiver.on('/rebind', failTimes(0));
    const res = await make({ allowPrivate: false, resolve: async () => ['93.184.216.34', '127.0.0.1'] }).send(
      receiver.url('/rebind', 'rebind.webhooks.test'),
      '{}',
      {},
    );
    expect(res).to.include({ status: null, outcome: 'blocked_address' });
    // The rule, not the inside address the name pointed at.
    expect(res.error).to.match(/resolves to a private or internal address/);
    expect(res.error).to.not.match(/127\.0\.0\.1/);
    expect(receiver.received('/rebind')).to.have.length(0);
  });

  it('refuses a port outside 443, 8443 and WEBHOOK_ALLOWED_PORTS before any lookup', async () => {
    let lookups = 0;
    const resolve: Resolver = async () => (lookups++, ['93.184.216.34']);
    const res = await make({ allowPrivate: false, resolve }).send('https://hooks.example.com:25/x', '{}', {});
    expect(res).to.include({ status: null, outcome: 'blocked_address' });
    expect(res.error).to.match(/port 25 is not allowed/);
    expect(lookups).to.equal(0);
    // Allowed by the list: it gets as far as dialling the (public, unreachable here) address.
    const listed = createSender({ policy: { allowPrivate: false, allowedPorts: [[25, 25]] }, resolve, caPem: ca, timeoutMs: 300, userAgent: 'x' });
    senders.push(listed);
    expect((await listed.send('https://hooks.example.com:25/x', '{}', {})).outcome).to.not.equal('blocked_address');
    expect(lookups).to.equal(1);
  });

  it('refuses an inside address spelled with trailing dots, without a lookup', async () => {
    let lookups = 0;
    const s = make({ allowPrivate: false, resolve: async () => (lookups++, ['93.184.216.34']) });
    expect(await s.send(`https://127.0.0.1..:${receiver.port}/dots`, '{}', {})).to.include({ outcome: 'blocked_address' });
    expect(await s.send(`https://localhost..:${receiver.port}/dots`, '{}', {})).to.include({ outcome: 'blocked_address' });
    expect(lookups).to.equal(0);
    expect(receiver.received('/dots')).to.have.length(0);
  });

  it('tells the resolver whose lookup it is (the per-account cap)', async () => {
    const asked: unknown[] = [];
    const s = make({ resolve: async (_n, ctx) => (asked.push(ctx), ['127.0.0.1']) });
    expect(await s.send(receiver.url('/ctx', 'ctx.webhooks.test'), '{}', {}, { account: 'acct_x' })).to.include({ outcome: 'ok' });
    expect(asked).to.deep.equal([{ account: 'acct_x' }]);
  });

  it('refuses a literal inside address and a local name before any lookup', async () => {
    let lookups = 0;
    const s = make({ allowPrivate: false, resolve: async () => (lookups++, ['93.184.216.34']) });
    expect(await s.send(receiver.url('/lit'), '{}', {})).to.include({ outcome: 'blocked_address' });
    expect(await s.send(receiver.url('/lit', 'localhost'), '{}', {})).to.include({ outcome: 'blocked_address' });
    expect(await s.send(receiver.url('/lit', '[::ffff:127.0.0.1]'), '{}', {})).to.include({ outcome: 'blocked_address' });
    expect(lookups).to.equal(0);
    expect(receiver.received('/lit')).to.have.length(0);
  });

  it('reports an untrusted certificate as tls, a refused port as connect, a missing name as dns', async () => {
    expect(await make({ caPem: null }).send(receiver.url('/tls'), '{}', {})).to.include({ outcome: 'tls' });
    const refused = await make().send('https://127.0.0.1:1/x', '{}', {});
    expect(refused).to.include({ outcome: 'connect' });
    expect(refused.error).to.match(/ECONNREFUSED/).and.not.match(/127\.0\.0\.1/); // no inside address in a stored error
    const nx: Resolver = async (n) => {
      throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${n}`), { code: 'ENOTFOUND' });
    };
    expect(await make({ resolve: nx }).send(receiver.url('/x', 'nx.webhooks.test'), '{}', {})).to.include({ outcome: 'dns' });
  });

  it('says where trusted CAs come from when a certificate is self-signed or from an unknown CA', async () => {
    const res = await make({ caPem: null }).send(receiver.url('/tls-hint'), '{}', {});
    expect(res).to.include({ outcome: 'tls' });
    expect(res.error).to.match(/^(DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT)/);
    expect(res.error).to.match(/WEBHOOK_CA_FILE/);
    // A certificate for another name is not a CA problem: no hint there.
    const wrongName = await make({ resolve: async () => ['127.0.0.1'] }).send(receiver.url('/tls-hint', 'hooks.other.example'), '{}', {});
    expect(wrongName).to.include({ outcome: 'tls' });
    expect(wrongName.error).to.not.match(/WEBHOOK_CA_FILE/);
    expect(receiver.received('/tls-hint')).to.have.length(0);
  });

  it('shows the addresses in a TLS error when private targets are allowed (development)', async () => {
    // A receiver whose certificate names only a host name, dialled by its address.
    const pems = await generate([{ name: 'commonName', value: 'named-only' }], {
      keyType: 'ec',
      extensions: [{ name: 'subjectAltName', altNames: [{ type: 2, value: 'named-only.test' }] }],
    });
    const server = https.createServer({ cert: pems.cert, key: pems.private }, (_req, res) => res.end('ok'));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const s = createSender({ policy: { allowPrivate: true }, resolve: async () => ['127.0.0.1'], caPem: pems.cert, timeoutMs: 4000, userAgent: 'test-agent/1' });
      senders.push(s);
      const res = await s.send(`https://127.0.0.1:${port}/x`, '{}', {});
      expect(res).to.include({ outcome: 'tls' });
      expect(res.error).to.match(/IP: 127\.0\.0\.1 is not in the cert's list/).and.not.include('<internal address>');
    } finally {
      server.close();
    }
  });

  it('connects to the checked address under the URL host name (certificate checked against the name)', async () => {
    receiver.on('/named', failTimes(0));
    const res = await make({ resolve: async () => ['127.0.0.1'] }).send(receiver.url('/named', 'hooks.webhooks.test'), '{}', {});
    expect(res).to.include({ status: 200, outcome: 'ok' });
    expect(receiver.received('/named')[0]?.headers.host).to.equal(`hooks.webhooks.test:${receiver.port}`);
  });

  it('still checks the certificate against the host name with the extra CA (one shared TLS context)', async () => {
    // The CA is trusted, but the certificate names neither this host nor its address.
    const res = await make({ resolve: async () => ['127.0.0.1'] }).send(receiver.url('/wrong-name', 'hooks.other.example'), '{}', {});
    expect(res).to.include({ outcome: 'tls' });
    expect(receiver.received('/wrong-name')).to.have.length(0);
  });

});
