/**
 * Taking over an ingest idempotency key (a failed attempt, or one whose lease
 * ran out) and per-account event keys: features/ingest/idempotency.ts.
 */
import { expect } from 'chai';
import { DEV_INGEST_TOKEN } from '../src/config.js';
import { bodyHash, IdempotencyKeys, keyId, takeoverHooks, type Claim } from '../src/features/ingest/idempotency.js';
import { ingestEvents } from '../src/features/ingest/service.js';
import type { IngestEvent } from '../src/features/ingest/schemas.js';
import type { EventEnvelope } from '#shared/eventlog/types.js';
import { uniqueName } from '#test-support/env.js';
import { call, sharedApis } from './support/api.js';
import { createAccount } from './support/accounts.js';

const auth = { authorization: `Bearer ${DEV_INGEST_TOKEN}` };

/** Resolves every caller once `n` have arrived: both retries have read the key before either claims it. */
function barrier(n: number): () => Promise<void> {
  let arrived = 0;
  let release!: () => void;
  const all = new Promise<void>((r) => (release = r));
  return async () => {
    if (++arrived === n) release();
    await all;
  };
}

describe('ingest idempotency key takeover', function () {
  this.timeout(120_000);

  it('lets exactly one of two retries that read a failed key at the same moment take it over: each key is produced once', async () => {
    const [a] = await sharedApis();
    const account = await createAccount(a.url);
    const publish = a.deps.events.producer.publish.bind(a.deps.events.producer);
    const produced = new Map<string, number>();
    a.deps.events.producer.publish = (envelopes: EventEnvelope[]) => {
      for (const e of envelopes) produced.set(e.id, (produced.get(e.id) ?? 0) + 1);
      return publish(envelopes);
    };
    try {
      for (let round = 0; round < 10; round++) {
        const events: IngestEvent[] = [{ account_id: account.userId, type: 'message.received', data: { round } }];
        const key = uniqueName(`takeover${round}`);
        const keys = a.deps.mongo.collections.ingestKeys;
        // A first attempt reserved the key and failed (a 503): its retries may take it over at once.
        const failedId = `evt_${uniqueName('failed').replace(/[^a-z0-9]/gi, '')}`;
        await keys.insertOne({
          _id: keyId('request', DEV_INGEST_TOKEN, key),
          kind: 'request',
          body_hash: bodyHash(events),
          state: 'failed',
          attempt: `first-${round}`,
          lease_until: new Date(),
          ids: [failedId],
          created_at: [new Date().toISOString()],
          cursors: null,
          expires_at: new Date(Date.now() + 86_400_000),
        });
        const wait = barrier(2);
        takeoverHooks.beforeTakeover = () => wait();
        const results = await Promise.allSettled([0, 1].map(() => ingestEvents(a.deps, events, { token: DEV_INGEST_TOKEN, requestKey: key })));
        takeoverHooks.beforeTakeover = undefined;
        const answered = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
        const refused = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as { code?: string }] : []));
        expect(produced.get(failedId), `round ${round}: times the key's event was produced`).to.equal(1);
        expect(answered.length, `round ${round}`).to.be.at.least(1);
        for (const r of answered) expect(r.events.map((e) => e.id)).to.deep.equal([failedId]);
        for (const reason of refused) expect(reason.code).to.equal('conflict');
        // Settled: a later retry answers the stored outcome and produces nothing.
        const after = await ingestEvents(a.deps, events, { token: DEV_INGEST_TOKEN, requestKey: key });
        expect(after.replayed).to.equal(true);
        expect(after.events.map((e) => e.id)).to.deep.equal([failedId]);
        expect(produced.get(failedId)).to.equal(1);
      }
    } finally {
      a.deps.events.producer.publish = publish;
      takeoverHooks.beforeTakeover = undefined;
    }
  });

  describe('an outcome stored after the lease ran out (a slow store)', () => {
    const claimOf = (key: string): Claim => ({ _id: keyId('request', DEV_INGEST_TOKEN, key), kind: 'request', bodyHash: 'body', indexes: [0] });
    let now = Date.now();
    const clock = (): Date => new Date(now);

    it('is answered by a retry that comes after it, which produces nothing', async () => {
      const [a] = await sharedApis();
      const keys = new IdempotencyKeys(a.deps.mongo.collections.ingestKeys, 1000, clock);
      const claim = claimOf(uniqueName('slow-first'));
      const [first] = await keys.reserveAll([claim], () => 1);
      now += 5000; // the lease ran out while the outcome was on its way
      expect(await keys.complete([first!], () => ['c1'])).to.deep.equal([]);
      const [retry] = await keys.reserveAll([claim], () => 1);
      expect(retry).to.deep.include({ state: 'done', ids: first!.ids, cursors: ['c1'] });
    });

    it('loses to a retry that took the key over first: the late outcome is dropped and the retry has the same ids', async () => {
      const [a] = await sharedApis();
      const keys = new IdempotencyKeys(a.deps.mongo.collections.ingestKeys, 1000, clock);
      const claim = claimOf(uniqueName('slow-late'));
      const [first] = await keys.reserveAll([claim], () => 1);
      now += 5000;
      const [retry] = await keys.reserveAll([claim], () => 1);
      expect(retry).to.deep.include({ state: 'reserved', ids: first!.ids });
      // The first attempt's outcome lands now: too late, the step after it is the retry's.
      expect(await keys.complete([first!], () => ['late'])).to.have.length(1);
      // While the retry holds the key, a third attempt waits.
      const busy = await keys.reserveAll([claim], () => 1).catch((err: unknown) => err);
      expect(busy).to.include({ code: 'conflict' });
      expect(await keys.complete([retry!], () => ['c2'])).to.deep.equal([]);
      const [third] = await keys.reserveAll([claim], () => 1);
      expect(third).to.deep.include({ state: 'done', ids: first!.ids, cursors: ['c2'] });
    });
  });

  it("scopes a per-event idempotency_key to the event's account: two accounts may use one key", async () => {
    const [a, b] = await sharedApis();
    const x = await createAccount(a.url);
    const y = await createAccount(a.url);
    const key = uniqueName('shared-key');
    const post = (base: string, accountId: string) =>
      call(base, 'POST', '/internal/v1/events', { headers: auth, body: { events: [{ account_id: accountId, type: 'call.started', data: {}, idempotency_key: key }] } });
    const ofX = await post(a.url, x.userId);
    const ofY = await post(b.url, y.userId);
    expect(ofX.status, JSON.stringify(ofX.body)).to.equal(202);
    expect(ofY.status, JSON.stringify(ofY.body)).to.equal(202);
    expect(ofY.body.events[0].id).to.not.equal(ofX.body.events[0].id);
    // Within one account the key still makes a retry harmless.
    const retryY = await post(a.url, y.userId);
    expect(retryY.status).to.equal(202);
    expect(retryY.body).to.deep.equal(ofY.body);
    expect(retryY.headers.get('idempotent-replayed')).to.equal('true');
  });

  it('answers a retry of an event key stored in the format before keys were per account with its stored ids', async () => {
    const [a] = await sharedApis();
    const account = await createAccount(a.url);
    const key = uniqueName('legacy');
    const event = { account_id: account.userId, type: 'call.started', data: { n: 1 }, idempotency_key: key };
    const stored = { id: `evt_${uniqueName('legacy').replace(/[^a-z0-9]/gi, '')}`, cursor: 'c_legacy' };
    await a.deps.mongo.collections.ingestKeys.insertOne({
      _id: keyId('event', DEV_INGEST_TOKEN, key),
      kind: 'event',
      body_hash: bodyHash(event),
      state: 'done',
      attempt: 'before',
      lease_until: new Date(),
      ids: [stored.id],
      created_at: [new Date().toISOString()],
      cursors: [stored.cursor],
      expires_at: new Date(Date.now() + 86_400_000),
    });
    const retry = await call(a.url, 'POST', '/internal/v1/events', { headers: auth, body: { events: [event] } });
    expect(retry.status, JSON.stringify(retry.body)).to.equal(202);
    expect(retry.body.events).to.deep.equal([stored]);
    expect(retry.headers.get('idempotent-replayed')).to.equal('true');
  });
});
