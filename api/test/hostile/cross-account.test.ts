/**
 * The cross-account matrix: for every endpoint in the table that takes a
 * cursor or an id, account B's credential with account A's cursor or id never
 * returns A's data and never changes it: the answer is B's own data, empty,
 * or a refusal (400 for a cursor of another partition, 404 for an id).
 * B is placed in A's partition too, where A's cursors are well-formed for B.
 */
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import fc from 'fast-check';
import type { RunningApi } from '../../src/server.js';
import { bearer, createAccount, type TestAccount } from '../support/accounts.js';
import { call, sharedApis } from '../support/api.js';
import { ENDPOINTS, endpointName, pathOf, type Endpoint, type Fixture } from './support/endpoints.js';
import { ingestOne, mintStreamToken } from './support/fixtures.js';
import { answer, describeRequest, type HostileRequest } from './support/http.js';
import { assertSafe } from './support/oracle.js';
import { record } from './support/tally.js';
import { dropHostileWebhooks, ownsWebhooks } from './support/webhook-cleanup.js';

interface Owner {
  account: TestAccount;
  /** Text that appears only in this account's event data. */
  marker: string;
  eventIds: string[];
  cursors: string[];
}

async function owner(api: RunningApi, account: TestAccount, events = 3): Promise<Owner> {
  const marker = `owned-by-${account.userId}-${randomBytes(4).toString('hex')}`;
  const sent = [];
  for (let i = 0; i < events; i++) sent.push(await ingestOne(api, account.userId, { marker, i }));
  // Wait until the account can read them back: later polls then see them as stored.
  const deadline = Date.now() + 20_000;
  for (;;) {
    const res = await call(api.url, 'GET', '/api/v1/events', { headers: bearer(account.apiKey) });
    if (res.status === 200 && res.body.events.length >= events) break;
    if (Date.now() > deadline) throw new Error('events of the fixture never became readable');
    await new Promise((r) => setTimeout(r, 100));
  }
  return { account, marker, eventIds: sent.map((e) => e.id), cursors: sent.map((e) => e.cursor) };
}

/** An account in the given partition (or any other), found by signing up until one lands there. */
async function accountIn(api: RunningApi, partition: number, same: boolean): Promise<TestAccount> {
  for (let tries = 0; tries < 50; tries++) {
    const acct = await createAccount(api.url);
    if ((api.deps.events.producer.partitionOf(acct.userId) === partition) === same) return acct;
  }
  throw new Error('could not place an account');
}

/** Reads a stream for `ms` and returns what arrived (or the error answer). */
async function readFor(url: string, headers: Record<string, string>, ms: number): Promise<{ status: number; text: string; headers: Headers }> {
  const res = await fetch(url, { headers, signal: AbortSignal.timeout(ms) }).catch((err: Error) => err);
  if (res instanceof Error) return { status: 0, text: '', headers: new Headers() };
  let text = '';
  try {
    const reader = res.body!.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += Buffer.from(value).toString('utf8');
    }
  } catch {
    // the timeout ended the read: what arrived is what we check
  }
  return { status: res.status, text, headers: res.headers };
}

describe('hostile: cross-account matrix', function () {
  this.timeout(120_000);
  let apis: [RunningApi, RunningApi];
  let a: Owner;
  const intruders: { label: string; who: Owner }[] = [];

  before(async () => {
    apis = await sharedApis();
    const accountA = await createAccount(apis[0].url);
    a = await owner(apis[0], accountA);
    const partition = apis[0].deps.events.producer.partitionOf(accountA.userId);
    intruders.push({ label: 'B in the same partition', who: await owner(apis[1], await accountIn(apis[0], partition, true), 2) });
    intruders.push({ label: 'B in another partition', who: await owner(apis[1], await accountIn(apis[0], partition, false), 2) });
  });

  after(async () => {
    await dropHostileWebhooks(apis[0]);
  });

  function expectNothingOf(victim: Owner, text: string, what: string): void {
    expect(text, `${what} leaked the victim's data`).to.not.include(victim.marker);
    for (const id of victim.eventIds) expect(text, `${what} leaked event ${id}`).to.not.include(id);
  }

  /** B's request to `ep` carrying A's cursor where the endpoint takes one. */
  function withVictimCursor(ep: Endpoint, b: Owner, cursor: string, streamToken: string): HostileRequest {
    const f: Fixture = { account: b.account, cursor };
    const headers = ep.auth === 'stream_token' ? {} : bearer(b.account.apiKey);
    if (ep.cursorIn === 'body') {
      const body = fc.sample(ep.body!(f), { numRuns: 1, seed: 11 })[0]!;
      return { method: ep.method, path: pathOf(ep, f), headers, body: JSON.stringify({ ...body, since: cursor, timeout_ms: 300 }) };
    }
    const query = new URLSearchParams({ since: cursor });
    if (ep.auth === 'stream_token') query.set('token', streamToken);
    return { method: ep.method, path: `${pathOf(ep, f)}?${query}`, headers };
  }

  for (const ep of ENDPOINTS.filter((e) => e.cursorIn)) {
    it(`never serves A's events to B on ${endpointName(ep)} given A's cursors`, async () => {
      let n = 0;
      for (const { label, who: b } of intruders) {
        let sawOwn = false;
        const streamToken = await mintStreamToken(apis[1], b.account.apiKey);
        // Before A's first event, between them, after the last: every one of A's positions.
        for (const cursor of a.cursors) {
          const req = withVictimCursor(ep, b, cursor, streamToken);
          const what = `${label}: ${describeRequest(req)}`;
          // Same partition: A's cursor is a position B may read after (B's own events);
          // another partition: it is refused. Either way nothing of A's.
          const expected = label.includes('same') ? 200 : 400;
          if (ep.holdsOpen && ep.method === 'GET') {
            for (const extra of [{}, { 'last-event-id': cursor }] as Record<string, string>[]) {
              const res = await readFor(apis[n % 2]!.url + req.path, { ...req.headers, ...extra }, 800);
              expect(res.status, `${what} -> ${res.status} ${res.text.slice(0, 200)}`).to.equal(expected);
              expectNothingOf(a, res.text, what);
              sawOwn ||= res.text.includes(b.marker);
              n += 1;
            }
          } else {
            const res = await answer(apis[n % 2]!.url, { ...req, timeoutMs: 10_000 });
            assertSafe(res, what);
            expect(res.status, `${what} -> ${res.text.slice(0, 200)}`).to.equal(expected);
            expectNothingOf(a, res.text, what);
            sawOwn ||= res.text.includes(b.marker);
            n += 1;
          }
        }
        // The positive control: in A's partition, A's cursors do lead B to B's own events.
        if (label.includes('same')) expect(sawOwn, `${label} saw its own events`).to.equal(true);
      }
      record('cross_account', endpointName(ep), n);
    });
  }

  /** A's subscription, made on first use (only when the table has routes with `:id`). */
  let owned: Promise<{ id: string; secret: string; description: string }> | null = null;
  const victimWebhook = (): Promise<{ id: string; secret: string; description: string }> =>
    (owned ??= (async () => {
      const description = `${a.marker}-webhook`;
      ownsWebhooks(a.account.userId);
      const res = await call(apis[0].url, 'POST', '/api/v1/webhooks', { headers: bearer(a.account.apiKey), body: { url: 'https://93.184.216.34/a-only', events: ['*'], description } });
      if (res.status !== 201) throw new Error(`webhook creation answered ${res.status}: ${JSON.stringify(res.body)}`);
      return { id: res.body.id, secret: res.body.secret, description };
    })());

  for (const ep of ENDPOINTS.filter((e) => e.route.includes(':id'))) {
    it(`answers B's ${endpointName(ep)} on A's id with 404 and changes nothing`, async () => {
      const hook = await victimWebhook();
      let n = 0;
      for (const { label, who: b } of intruders) {
        for (const headers of [bearer(b.account.apiKey), bearer(b.account.token), { 'x-api-key': b.account.apiKey }]) {
          const req: HostileRequest = { method: ep.method, path: pathOf(ep, { account: b.account, id: hook.id }), headers };
          if (ep.body) req.body = JSON.stringify(fc.sample(ep.body({ account: b.account, id: hook.id }), { numRuns: 1, seed: 5 })[0]);
          const res = await answer(apis[n % 2]!.url, req);
          const what = `${label}: ${describeRequest(req)}`;
          assertSafe(res, what);
          expect(res.status, `${what} -> ${res.text.slice(0, 200)}`).to.equal(404);
          for (const secret of [hook.secret, hook.description, 'a-only']) expect(res.text, what).to.not.include(secret);
          n += 1;
        }
      }
      // A still has it, unchanged, secret and all.
      const mine = await call(apis[1].url, 'GET', `/api/v1/webhooks/${hook.id}`, { headers: bearer(a.account.apiKey) });
      expect(mine.status).to.equal(200);
      expect(mine.body).to.include({ id: hook.id, description: hook.description });
      const secret = await call(apis[1].url, 'POST', `/api/v1/webhooks/${hook.id}/secret`, { headers: bearer(a.account.apiKey) });
      expect(secret.body.secret).to.equal(hook.secret);
      record('cross_account', endpointName(ep), n);
    });
  }

  if (ENDPOINTS.some((e) => e.method === 'GET' && e.route === '/api/v1/webhooks')) {
    it("never lists A's subscription to B", async () => {
      const hook = await victimWebhook();
      for (const { who: b } of intruders) {
        const res = await answer(apis[1].url, { method: 'GET', path: '/api/v1/webhooks', headers: bearer(b.account.apiKey) });
        expect(res.status).to.equal(200);
        expect(res.text).to.not.include(hook.id);
        expect(res.text).to.not.include(a.marker);
      }
      record('cross_account', 'GET /api/v1/webhooks', intruders.length);
    });
  }

  it("leaves A's events as they were", async () => {
    const res = await call(apis[0].url, 'GET', '/api/v1/events', { headers: bearer(a.account.apiKey) });
    expect(res.body.events.map((e: { id: string }) => e.id)).to.deep.equal(a.eventIds);
  });
});
