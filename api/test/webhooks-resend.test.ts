/**
 * Resend, recover and replay (POST /api/v1/webhooks/{id}/deliveries/{delivery_id}/resend,
 * …/recover, …/replay) end to end: the API queues, a real delivery process
 * sends to an HTTPS receiver, the attempts show the trigger. Idempotency-Key,
 * ownership (404) and bad bodies (400 naming the field) too.
 */
import { expect } from 'chai';
import { MongoClient } from 'mongodb';
import { tryDecodeCursor } from '#shared/cursor.js';
import { deliveryId, insertHooks } from '#shared/mongo/delivery-queue.js';
import type { DeliveryDoc, WatermarkDoc, WebhookOpKeyDoc } from '#shared/mongo/index.js';
import { atFileEnd } from '#test-support/cleanup.js';
import { baseTestEnv } from '#test-support/env.js';
import { Receiver, type Behaviour } from '#test-support/receiver.js';
import { deliveryTestEnv, startTestDelivery, waitForGroup } from '../../delivery/test/support/delivery.js';
import { opKeyId } from '../src/features/webhooks/op-keys.js';
import { operationDeliveryId, recoverDeliveries, recoverHooks, recoveryId, replayEvents } from '../src/features/webhooks/operations.js';
import type { RunningApi } from '../src/server.js';
import { bearer, createAccount, type TestAccount } from './support/accounts.js';
import { call } from './support/api.js';
import { webhookApi, webhookTestEnv } from './support/webhooks.js';

describe('webhook resend, recover and replay (delivery process, HTTPS receiver)', function () {
  this.timeout(90_000);
  let api: RunningApi;
  let receiver: Receiver;
  let db: MongoClient;

  const deliveries = () => db.db(webhookTestEnv().MONGO_DB).collection<DeliveryDoc>('deliveries');
  const watermarks = () => db.db(webhookTestEnv().MONGO_DB).collection<WatermarkDoc>('watermarks');

  const ingest = async (acct: TestAccount, type: string): Promise<{ id: string; cursor: string }> => {
    const res = await call(api.url, 'POST', '/internal/v1/events', { headers: bearer(api.deps.config.ingestToken), body: { account_id: acct.userId, type, data: { n: Math.random() } } });
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    return res.body.events[0];
  };
  const subscribe = async (acct: TestAccount, path: string, events: string[]): Promise<string> => {
    const res = await call(api.url, 'POST', '/api/v1/webhooks', { headers: bearer(acct.apiKey), body: { url: receiver.url(path), events } });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return res.body.id;
  };
  const post = (acct: TestAccount, path: string, body?: unknown, key?: string) =>
    call(api.url, 'POST', `/api/v1/webhooks${path}`, { headers: { ...bearer(acct.apiKey), ...(key ? { 'Idempotency-Key': key } : {}) }, body });
  const idsAt = (path: string): string[] => receiver.received(path).map((r) => r.body.id as string);
  /** A path that fails (500) while `failing.has(path)`, else answers 200. */
  const failing = new Set<string>();
  const switchable: (path: string) => Behaviour = (path) => () => ({ status: failing.has(path) ? 500 : 200 });

  const until = async <T>(what: string, read: () => Promise<T>, done: (v: T) => boolean, tries = 300): Promise<T> => {
    let v = await read();
    for (let i = 0; i < tries && !done(v); i++) {
      await new Promise((r) => setTimeout(r, 100));
      v = await read();
    }
    expect(done(v), `${what}: ${JSON.stringify(v)}`).to.equal(true);
    return v;
  };
  const failedFor = (id: string) => until(`delivery ${id} failed`, () => deliveries().findOne({ _id: id }), (d) => d?.state === 'failed');
  /** The delivery process records an attempt a moment after sending it: a resend finds the delivery by its record. */
  const recorded = (acct: TestAccount, sub: string, id: string) =>
    until(
      `an attempt of ${id} recorded`,
      async () => (await call(api.url, 'GET', `/api/v1/webhooks/${sub}/deliveries`, { headers: bearer(acct.apiKey) })).body.attempts as { delivery_id: string }[],
      (list) => list.some((a) => a.delivery_id === id),
    );
  const stored = async (cursor: string): Promise<void> => {
    const pos = tryDecodeCursor(cursor)!;
    await until('the event stored', () => watermarks().findOne({ _id: `${webhookTestEnv().EVENTS_TOPIC}:${pos.partition}` }), (w) => w !== null && BigInt(w.offset) >= pos.offset);
  };

  before(async function () {
    this.timeout(120_000);
    receiver = await Receiver.start();
    ({ api } = await webhookApi());
    db = new MongoClient(baseTestEnv().MONGO_URL!);
    atFileEnd(() => db.close());
    const env = deliveryTestEnv(receiver.caFile, webhookTestEnv());
    await startTestDelivery(env);
    await waitForGroup(env);
    const probe = await createAccount(api.url);
    await subscribe(probe, '/rs-probe', ['*']);
    await ingest(probe, 'call.started');
    await receiver.waitFor('/rs-probe', 1, 90_000);
  });
  after(() => receiver.close());

  it('resends a failed delivery: it arrives again with the same event, a new delivery id, and its attempts show trigger resend', async () => {
    const acct = await createAccount(api.url);
    receiver.on('/rs-failed', switchable('/rs-failed'));
    failing.add('/rs-failed');
    const sub = await subscribe(acct, '/rs-failed', ['*']);
    const event = await ingest(acct, 'call.started');
    const original = deliveryId(event.id, sub);
    await failedFor(original);
    const failedTries = receiver.received('/rs-failed').length;
    failing.delete('/rs-failed');

    const res = await post(acct, `/${sub}/deliveries/${original}/resend`);
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    expect(res.body).to.deep.include({ resent_from: original, event_id: event.id, trigger: 'resend' });
    expect(res.body.delivery_id).to.match(/^dlv_[0-9a-f]{24}$/).and.not.equal(original);
    const got = await receiver.waitFor('/rs-failed', failedTries + 1);
    const last = got.at(-1)!;
    expect(last.body.id).to.equal(event.id);
    expect(last.headers['x-service-delivery']).to.equal(res.body.delivery_id);
    expect(last.headers['webhook-id']).to.equal(res.body.delivery_id);

    const attempts = await until(
      'the resend attempt listed',
      async () => (await call(api.url, 'GET', `/api/v1/webhooks/${sub}/deliveries`, { headers: bearer(acct.apiKey) })).body.attempts as { delivery_id: string; trigger: string; outcome: string }[],
      (list) => list.some((a) => a.delivery_id === res.body.delivery_id && a.outcome === 'ok'),
    );
    for (const a of attempts) expect(a.trigger, JSON.stringify(a)).to.equal(a.delivery_id === original ? 'event' : 'resend');
    expect(attempts.filter((a) => a.delivery_id === original)).to.have.length(failedTries);

    const detail = await call(api.url, 'GET', `/api/v1/events/${event.id}/deliveries`, { headers: bearer(acct.apiKey) });
    expect(detail.status).to.equal(200);
    const byId = new Map((detail.body.deliveries as { id: string; trigger: string; state: string; attempts: { trigger: string }[] }[]).map((d) => [d.id, d]));
    expect(byId.get(original)).to.include({ trigger: 'event', state: 'failed' });
    expect(byId.get(res.body.delivery_id)).to.include({ trigger: 'resend', state: 'succeeded' });
    expect(byId.get(res.body.delivery_id)!.attempts.map((a) => a.trigger)).to.deep.equal(['resend']);
  });

  it('resends a delivery that succeeded at once (no stored delivery, only its attempt): the event again', async () => {
    const acct = await createAccount(api.url);
    const sub = await subscribe(acct, '/rs-ok', ['*']);
    const event = await ingest(acct, 'message.sent');
    await receiver.waitFor('/rs-ok', 1);
    const original = deliveryId(event.id, sub);
    await recorded(acct, sub, original);
    const res = await post(acct, `/${sub}/deliveries/${original}/resend`);
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    const got = await receiver.waitFor('/rs-ok', 2);
    expect(got.map((r) => r.body.id)).to.deep.equal([event.id, event.id]);
    expect(got[1]!.raw.toString()).to.equal(got[0]!.raw.toString()); // the same body, byte for byte
    expect(got[1]!.headers['x-service-delivery']).to.equal(res.body.delivery_id);
  });

  it('a resend whose API call dies between storing the delivery and its due entry is still sent (its safety entry, written first)', async () => {
    const acct = await createAccount(api.url);
    const path = '/rs-crash';
    const sub = await subscribe(acct, path, ['*']);
    const event = await ingest(acct, 'call.started');
    await receiver.waitFor(path, 1);
    const original = deliveryId(event.id, sub);
    await recorded(acct, sub, original);
    const safetyMs = insertHooks.safetyMs;
    insertHooks.safetyMs = 2000; // the scheduler reads the safety entry a moment later, not a minute
    insertHooks.afterInsert = async (docs) => {
      if (docs.some((d) => d.subscription_id === sub && d.trigger === 'resend')) throw new Error('the API died here');
    };
    try {
      const res = await post(acct, `/${sub}/deliveries/${original}/resend`);
      expect(res.status, JSON.stringify(res.body)).to.equal(500);
    } finally {
      insertHooks.afterInsert = undefined;
      insertHooks.safetyMs = safetyMs;
    }
    const resent = await until('the resend stored', () => deliveries().findOne({ origin_delivery_id: original }), (d) => d !== null);
    const got = await receiver.waitFor(path, 2);
    expect(got[1]!.body.id).to.equal(event.id);
    expect(got[1]!.headers['x-service-delivery']).to.equal(resent!._id);
  });

  it('recover queues exactly the failed deliveries created since the time, once per event, and continues from next_since when cut', async () => {
    const acct = await createAccount(api.url);
    const path = '/rs-recover';
    receiver.on(path, switchable(path));
    failing.add(path);
    const sub = await subscribe(acct, path, ['*']);
    const before = await ingest(acct, 'call.started');
    await failedFor(deliveryId(before.id, sub));
    await new Promise((r) => setTimeout(r, 20));
    const since = new Date().toISOString();
    const wanted = [await ingest(acct, 'call.ended'), await ingest(acct, 'message.sent')];
    for (const e of wanted) await failedFor(deliveryId(e.id, sub));
    failing.delete(path);
    const tries = receiver.received(path).length;

    // The bound, reached with a bound of 1 (the route's is 1,000): cut short, next_since to continue.
    const first = await recoverDeliveries(api.deps, acct.userId, sub, { since }, 1);
    const storedWanted = await Promise.all(wanted.map((e) => deliveries().findOne({ _id: deliveryId(e.id, sub) })));
    expect(first).to.deep.equal({ queued: 1, truncated: true, next_since: storedWanted[0]!.created_at.toISOString(), next_after_id: storedWanted[0]!._id });
    const rest = await post(acct, `/${sub}/recover`, { since: first.next_since, after_id: first.next_after_id });
    expect(rest.status, JSON.stringify(rest.body)).to.equal(202);
    expect(rest.body).to.deep.equal({ queued: 1, truncated: false, next_since: null, next_after_id: null });

    await receiver.waitFor(path, tries + 2);
    const recovered = await until(
      'both recovered deliveries succeeded',
      () => deliveries().find({ subscription_id: sub, trigger: 'recover' }).toArray(),
      (list) => list.length === 2 && list.every((d) => d.state === 'succeeded'),
    );
    expect(recovered.map((d) => d.event_id).sort()).to.deep.equal(wanted.map((e) => e.id).sort());
    expect(recovered.map((d) => d.origin_delivery_id).sort()).to.deep.equal(wanted.map((e) => deliveryId(e.id, sub)).sort());
    expect(idsAt(path).slice(tries).sort()).to.deep.equal(wanted.map((e) => e.id).sort());

    // Recovering again sends nothing: each of those events has been delivered since.
    const again = await post(acct, `/${sub}/recover`, { since });
    expect(again.body).to.deep.equal({ queued: 0, truncated: false, next_since: null, next_after_id: null });
    const attempts = (await call(api.url, 'GET', `/api/v1/webhooks/${sub}/deliveries`, { headers: bearer(acct.apiKey) })).body.attempts as { event_id: string; trigger: string; outcome: string }[];
    expect(attempts.filter((a) => a.trigger === 'recover').map((a) => [a.event_id, a.outcome]).sort()).to.deep.equal(wanted.map((e) => [e.id, 'ok']).sort());
  });

  it('a delivery given up after its (configured, short) schedule is visible as such and recover sends it: given_up on its last attempt only, state failed on the event', async () => {
    const acct = await createAccount(api.url);
    const path = '/rs-given-up';
    receiver.on(path, switchable(path));
    failing.add(path);
    const sub = await subscribe(acct, path, ['*']);
    const since = new Date(Date.now() - 1000).toISOString();
    const event = await ingest(acct, 'call.started');
    const original = deliveryId(event.id, sub);
    await failedFor(original);
    // WEBHOOK_RETRY_SCHEDULE=1s,1s,1s: the first attempt and three retries.
    const attempts = await until(
      'the last attempt listed',
      async () => (await call(api.url, 'GET', `/api/v1/webhooks/${sub}/deliveries`, { headers: bearer(acct.apiKey) })).body.attempts as { attempt: number; given_up: boolean; next_attempt_at: string | null; outcome: string }[],
      (list) => list.length === 4,
    );
    expect(attempts.map((a) => [a.attempt, a.outcome, a.given_up, a.next_attempt_at === null])).to.deep.equal([
      [4, 'http_5xx', true, true],
      [3, 'http_5xx', false, false],
      [2, 'http_5xx', false, false],
      [1, 'http_5xx', false, false],
    ]);
    const detail = await call(api.url, 'GET', `/api/v1/events/${event.id}/deliveries`, { headers: bearer(acct.apiKey) });
    const given = (detail.body.deliveries as { id: string; state: string; next_attempt_at: string | null; attempts: { given_up: boolean }[] }[]).find((d) => d.id === original)!;
    expect(given).to.deep.include({ state: 'failed', next_attempt_at: null });
    expect(given.attempts.map((a) => a.given_up)).to.deep.equal([false, false, false, true]);

    failing.delete(path);
    const res = await post(acct, `/${sub}/recover`, { since });
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    expect(res.body.queued).to.equal(1);
    const got = await receiver.waitFor(path, 5);
    expect(got.at(-1)!.body.id).to.equal(event.id);
    expect(got.at(-1)!.headers['x-service-delivery']).to.equal(recoveryId(original));
  });

  it('two recovers at once (a double click: other keys, or none) queue each failed event once; a recover after that recovery failed too queues it again', async () => {
    const acct = await createAccount(api.url);
    const path = '/rs-recover-twice';
    receiver.on(path, switchable(path));
    failing.add(path);
    const sub = await subscribe(acct, path, ['*']);
    const since = new Date(Date.now() - 1000).toISOString();
    const events = [await ingest(acct, 'call.started'), await ingest(acct, 'call.ended')];
    const originals = events.map((e) => deliveryId(e.id, sub));
    for (const id of originals) await failedFor(id);

    // Both read (nothing live for either event) before either inserts.
    let arrived = 0;
    let open!: () => void;
    const bothRead = new Promise<void>((r) => (open = r));
    recoverHooks.beforeInsert = async (s) => {
      if (s !== sub) return;
      if (++arrived === 2) open();
      await bothRead;
    };
    let both: Awaited<ReturnType<typeof post>>[];
    try {
      both = await Promise.all([post(acct, `/${sub}/recover`, { since }), post(acct, `/${sub}/recover`, { since }, `click-${Math.random()}`)]);
    } finally {
      recoverHooks.beforeInsert = undefined;
    }
    expect(arrived).to.equal(2);
    for (const r of both) expect(r.status, JSON.stringify(r.body)).to.equal(202);
    expect(both.map((r) => r.body.queued as number).reduce((a, b) => a + b)).to.equal(2);
    const firstRound = await deliveries().find({ subscription_id: sub, trigger: 'recover' }).toArray();
    expect(firstRound.map((d) => d._id).sort()).to.deep.equal(originals.map(recoveryId).sort());

    // Those recoveries fail too: now they are each event's newest failure, and a recover queues each event again, under new ids.
    for (const id of originals) await failedFor(recoveryId(id));
    failing.delete(path);
    const tries = receiver.received(path).length;
    const again = await post(acct, `/${sub}/recover`, { since });
    expect(again.body).to.deep.include({ queued: 2, truncated: false });
    await receiver.waitFor(path, tries + 2);
    const secondRound = originals.map((id) => recoveryId(recoveryId(id)));
    await until(
      'the second recoveries succeeded',
      () => deliveries().find({ _id: { $in: secondRound } }).toArray(),
      (list) => list.length === 2 && list.every((d) => d.state === 'succeeded'),
    );
    expect(await deliveries().countDocuments({ subscription_id: sub, trigger: 'recover' })).to.equal(4);
    expect(idsAt(path).slice(tries).sort()).to.deep.equal(events.map((e) => e.id).sort());
  });

  it('recover pages through more failed deliveries than its bound sharing one created_at (since + after_id), each looked at once', async () => {
    const acct = await createAccount(api.url);
    const path = '/rs-recover-same-ms';
    const sub = await subscribe(acct, path, ['*']);
    const at = new Date(Date.now() - 60_000);
    // Five failed deliveries created at the same millisecond (as a replay's or a recovery's are), of five events.
    const made = [0, 1, 2, 3, 4].map((i) => ({
      _id: operationDeliveryId('same-ms', 'replay', `${sub}:${i}`),
      account_id: acct.userId,
      subscription_id: sub,
      event_id: `evt_samems${i}${sub.slice(-8)}`,
      event_type: 'call.started' as const,
      body: JSON.stringify({ id: `evt_samems${i}`, n: i }),
      state: 'failed' as const,
      attempts: 1,
      next_attempt_at: null,
      claim_seq: 1,
      lease_owner: null,
      lease_until: null,
      last_status: 500,
      last_outcome: 'http_5xx' as const,
      created_at: at,
      updated_at: at,
      trigger: 'replay' as const,
    }));
    await deliveries().insertMany(made);
    const seen: string[] = [];
    let input: { since: string; after_id?: string } = { since: at.toISOString() };
    for (let call = 0; call < 10; call++) {
      const before = new Set((await deliveries().find({ subscription_id: sub, trigger: 'recover' }).toArray()).map((d) => d.origin_delivery_id!));
      const page = await recoverDeliveries(api.deps, acct.userId, sub, input, 2);
      const after = (await deliveries().find({ subscription_id: sub, trigger: 'recover' }).toArray()).map((d) => d.origin_delivery_id!);
      seen.push(...after.filter((id) => !before.has(id)));
      if (!page.truncated) {
        expect(page).to.include({ next_since: null, next_after_id: null });
        break;
      }
      expect(page.next_since).to.equal(at.toISOString());
      input = { since: page.next_since!, after_id: page.next_after_id! };
    }
    expect(seen.sort()).to.deep.equal(made.map((d) => d._id).sort());
    // The route takes after_id (and checks it).
    const bad = await post(acct, `/${sub}/recover`, { since: at.toISOString(), after_id: 'nope' });
    expect(bad.status).to.equal(400);
    expect(bad.body.error.details.map((d: { path: string }) => d.path)).to.include('after_id');
    const none = await post(acct, `/${sub}/recover`, { since: at.toISOString(), after_id: made.map((d) => d._id).sort().at(-1) });
    expect(none.status, JSON.stringify(none.body)).to.equal(202);
  });

  it('replay delivers exactly the matching events in (since, until], queued in log order, and the cut-off cursor continues it', async () => {
    const acct = await createAccount(api.url);
    const e0 = await ingest(acct, 'call.started');
    const e1 = await ingest(acct, 'call.started');
    await ingest(acct, 'message.sent'); // not a type the subscription takes
    const e3 = await ingest(acct, 'call.started');
    const e4 = await ingest(acct, 'call.started');
    const e5 = await ingest(acct, 'call.started'); // after until
    await stored(e5.cursor);
    // Created after the events: the log's own deliveries never reach it, only the replay does.
    const path = '/rs-replay';
    const sub = await subscribe(acct, path, ['call.started']);

    const first = await replayEvents(api.deps, acct.userId, sub, { since: e0.cursor, until: e4.cursor }, 'test-seed', 2);
    expect(first).to.deep.equal({ queued: 2, cursor: e3.cursor, truncated: true });
    const queuedFirst = await deliveries().find({ subscription_id: sub, trigger: 'replay' }).toArray();
    queuedFirst.sort((a, b) => a.next_attempt_at!.getTime() - b.next_attempt_at!.getTime());
    expect(queuedFirst.map((d) => d.event_id), 'due in log order').to.deep.equal([e1.id, e3.id]);

    const rest = await post(acct, `/${sub}/replay`, { since: first.cursor, until: e4.cursor });
    expect(rest.status, JSON.stringify(rest.body)).to.equal(202);
    expect(rest.body).to.deep.equal({ queued: 1, cursor: e4.cursor, truncated: false });

    await receiver.waitFor(path, 3);
    const got = receiver.received(path);
    expect(got.map((r) => r.body.id).sort()).to.deep.equal([e1.id, e3.id, e4.id].sort());
    // Each body is the event's record, its cursor included: sorted by cursor it is the log's order.
    const byCursor = [...got].sort((a, b) => Number(tryDecodeCursor(a.body.cursor)!.offset - tryDecodeCursor(b.body.cursor)!.offset));
    expect(byCursor.map((r) => r.body.cursor)).to.deep.equal([e1.cursor, e3.cursor, e4.cursor]);
    await until(
      'the replay attempts listed',
      async () => (await call(api.url, 'GET', `/api/v1/webhooks/${sub}/deliveries`, { headers: bearer(acct.apiKey) })).body.attempts as { trigger: string }[],
      (list) => list.length === 3 && list.every((a) => a.trigger === 'replay'),
    );

    // Without until: up to the end of the stored log.
    const toEnd = await post(acct, `/${sub}/replay`, { since: e4.cursor });
    expect(toEnd.body.queued).to.equal(1);
    expect(toEnd.body.truncated).to.equal(false);
    await receiver.waitFor(path, 4);
    expect(receiver.received(path).at(-1)!.body.id).to.equal(e5.id);
  });

  it('a replay to a fifo subscription is sent one at a time in log order, its first delivery failing once holding the rest', async () => {
    const acct = await createAccount(api.url);
    const start = await ingest(acct, 'message.sent'); // not a type the subscription takes: where the replay starts
    const events: { id: string; cursor: string }[] = [];
    for (let i = 0; i < 4; i++) events.push(await ingest(acct, 'call.started'));
    await stored(events[3]!.cursor);
    const path = '/rs-fifo';
    let failedOnce = false;
    receiver.on(path, (_n, req) => {
      if (req.body.id !== events[0]!.id || failedOnce) return { status: 200 };
      failedOnce = true;
      return { status: 503 };
    });
    const res = await call(api.url, 'POST', '/api/v1/webhooks', { headers: bearer(acct.apiKey), body: { url: receiver.url(path), events: ['call.started'], ordering: 'fifo' } });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    const replay = await post(acct, `/${res.body.id}/replay`, { since: start.cursor });
    expect(replay.status, JSON.stringify(replay.body)).to.equal(202);
    expect(replay.body.queued).to.equal(4);
    await receiver.waitFor(path, 5);
    const order = receiver.received(path).map((r) => events.findIndex((e) => e.id === r.body.id));
    expect(order, 'the first twice (its retry 1 s later), then the rest in log order').to.deep.equal([0, 0, 1, 2, 3]);
  });

  it('the same Idempotency-Key twice queues once and answers the first answer; another request under it is a 409', async () => {
    const acct = await createAccount(api.url);
    const path = '/rs-idem';
    const sub = await subscribe(acct, path, ['*']);
    const event = await ingest(acct, 'call.started');
    await receiver.waitFor(path, 1);
    const original = deliveryId(event.id, sub);
    await recorded(acct, sub, original);
    const key = `k-${Math.random()}`;

    const [a, b] = [await post(acct, `/${sub}/deliveries/${original}/resend`, undefined, key), await post(acct, `/${sub}/deliveries/${original}/resend`, undefined, key)];
    expect(a.status).to.equal(202);
    expect(b.status).to.equal(202);
    expect(b.body).to.deep.equal(a.body);
    expect(b.headers.get('idempotent-replayed')).to.equal('true');
    expect(a.headers.get('idempotent-replayed')).to.equal(null);
    expect(await deliveries().countDocuments({ origin_delivery_id: original })).to.equal(1);
    await receiver.waitFor(path, 2);

    // Two at the same moment: one runs, the other waits (409) or replays the answer; still one queued.
    const key2 = `k2-${Math.random()}`;
    const both = await Promise.all([1, 2].map(() => post(acct, `/${sub}/deliveries/${original}/resend`, undefined, key2)));
    expect(both.map((r) => r.status).sort()).to.satisfy((s: number[]) => s[0] === 202 && [202, 409].includes(s[1]!));
    expect(await deliveries().countDocuments({ origin_delivery_id: original })).to.equal(2);

    const other = await post(acct, `/${sub}/deliveries/dlv_${'0'.repeat(24)}/resend`, undefined, key);
    expect(other.status).to.equal(409);
    expect(other.body.error.details[0].path).to.equal('Idempotency-Key');
    // The key is per operation: the same key on replay is another key.
    const replay = await post(acct, `/${sub}/replay`, { since: event.cursor }, key);
    expect(replay.status, JSON.stringify(replay.body)).to.equal(202);
    const replayAgain = await post(acct, `/${sub}/replay`, { since: event.cursor }, key);
    expect(replayAgain.body).to.deep.equal(replay.body);
    const recover = await post(acct, `/${sub}/recover`, { since: new Date(Date.now() - 60_000).toISOString() }, key);
    expect(recover.status).to.equal(202);
    expect((await post(acct, `/${sub}/recover`, { since: new Date().toISOString() }, key)).status).to.equal(409);
  });

  it('a keyed call still running answers 409 with Retry-After; one that died is run again after its lease, with the same delivery id (queued once)', async () => {
    const acct = await createAccount(api.url);
    const path = '/rs-died';
    const sub = await subscribe(acct, path, ['*']);
    const event = await ingest(acct, 'call.started');
    await receiver.waitFor(path, 1);
    const original = deliveryId(event.id, sub);
    await recorded(acct, sub, original);
    const keys = db.db(webhookTestEnv().MONGO_DB).collection<WebhookOpKeyDoc>('webhook_op_keys');
    const key = `died-${Math.random()}`;
    const _id = opKeyId(acct.userId, 'resend', key);
    const first = await post(acct, `/${sub}/deliveries/${original}/resend`, undefined, key);
    expect(first.status).to.equal(202);
    expect(first.body.delivery_id).to.equal(operationDeliveryId(_id, 'resend', original));
    // As if that call had died after queueing, before storing its answer: pending, lease running.
    const stored = (await keys.findOne({ _id }))!;
    await keys.updateOne({ _id }, { $set: { state: 'pending', response: null, lease_until: new Date(Date.now() + 30_000) } });
    const busy = await post(acct, `/${sub}/deliveries/${original}/resend`, undefined, key);
    expect(busy.status).to.equal(409);
    expect(Number(busy.headers.get('retry-after'))).to.be.within(1, 30);
    // Its lease ran out: the repeat runs it again, under the same id, and finds it queued already.
    await keys.updateOne({ _id }, { $set: { lease_until: new Date(Date.now() - 1000) } });
    const again = await post(acct, `/${sub}/deliveries/${original}/resend`, undefined, key);
    expect(again.status, JSON.stringify(again.body)).to.equal(202);
    expect(again.body).to.deep.equal(first.body);
    expect(again.headers.get('idempotent-replayed')).to.equal(null);
    expect(await deliveries().countDocuments({ origin_delivery_id: original })).to.equal(1);
    expect((await keys.findOne({ _id }))!.state).to.equal('done');
    expect(stored.account_id).to.equal(acct.userId);
  });

  it("answers 404 for another account's subscription or delivery and for malformed ids, 409 for a disabled subscription", async () => {
    const owner = await createAccount(api.url);
    const stranger = await createAccount(api.url);
    const sub = await subscribe(owner, '/rs-owned', ['*']);
    const event = await ingest(owner, 'call.started');
    await receiver.waitFor('/rs-owned', 1);
    const dlv = deliveryId(event.id, sub);
    await recorded(owner, sub, dlv);
    const theirs = await subscribe(stranger, '/rs-theirs', ['*']);
    const since = { since: new Date(Date.now() - 60_000).toISOString() };
    const cases: [TestAccount, string, unknown][] = [
      [stranger, `/${sub}/deliveries/${dlv}/resend`, undefined],
      [stranger, `/${theirs}/deliveries/${dlv}/resend`, undefined],
      [owner, `/${sub}/deliveries/dlv_nothex/resend`, undefined],
      [owner, `/${sub}/deliveries/${deliveryId(event.id, theirs)}/resend`, undefined],
      [owner, `/wh_nothex/deliveries/${dlv}/resend`, undefined],
      [stranger, `/${sub}/recover`, since],
      [stranger, `/${sub}/replay`, { since: event.cursor }],
    ];
    for (const [acct, path, body] of cases) {
      const res = await post(acct, path, body);
      expect(res.status, `${path}: ${JSON.stringify(res.body)}`).to.equal(404);
    }
    expect(await deliveries().countDocuments({ origin_delivery_id: dlv })).to.equal(0);

    await call(api.url, 'PATCH', `/api/v1/webhooks/${sub}`, { headers: bearer(owner.apiKey), body: { enabled: false } });
    for (const [path, body] of [[`/${sub}/deliveries/${dlv}/resend`, undefined], [`/${sub}/recover`, since], [`/${sub}/replay`, { since: event.cursor }]] as [string, unknown][]) {
      expect((await post(owner, path, body)).status, path).to.equal(409);
    }
  });

  it('refuses bad bodies and keys with 400 naming the field', async () => {
    const acct = await createAccount(api.url);
    const other = await createAccount(api.url);
    const sub = await subscribe(acct, '/rs-bad', ['*']);
    const mine = await ingest(acct, 'call.started');
    const theirs = await ingest(other, 'call.started');
    const cases: [string, unknown, string][] = [
      ['recover', {}, 'since'],
      ['recover', { since: 'yesterday' }, 'since'],
      ['recover', { since: 42 }, 'since'],
      ['recover', { since: new Date(Date.now() - 31 * 86_400_000).toISOString() }, 'since'],
      ['recover', { since: new Date().toISOString(), limit: 5 }, 'limit'],
      ['replay', {}, 'since'],
      ['replay', { since: 'c1_nope' }, 'since'],
      ['replay', { since: mine.cursor, until: 'x' }, 'until'],
      ['replay', { since: mine.cursor, until: 7 }, 'until'],
      ['replay', { since: mine.cursor, extra: true }, 'extra'],
    ];
    const partitionOf = (c: string) => tryDecodeCursor(c)!.partition;
    if (partitionOf(theirs.cursor) !== partitionOf(mine.cursor)) cases.push(['replay', { since: theirs.cursor }, 'since']);
    const before = await ingest(acct, 'call.started');
    cases.push(['replay', { since: before.cursor, until: mine.cursor }, 'until']); // until before since
    for (const [op, body, field] of cases) {
      const res = await post(acct, `/${sub}/${op}`, body);
      expect(res.status, `${op} ${JSON.stringify(body)}: ${JSON.stringify(res.body)}`).to.equal(400);
      expect(res.body.error.details.map((d: { path: string }) => d.path), JSON.stringify(res.body)).to.include(field);
    }
    const badKey = await post(acct, `/${sub}/recover`, { since: new Date().toISOString() }, 'x'.repeat(256));
    expect(badKey.status).to.equal(400);
    expect(badKey.body.error.details[0].path).to.equal('Idempotency-Key');
  });
});
