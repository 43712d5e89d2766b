import { expect } from 'chai';
import type { Consumer } from 'kafkajs';
import { decodeCursor } from '#shared/cursor.js';
import { buildEnvelope, toEventDoc } from '#shared/eventlog/envelope.js';
import { createConsumer } from '#shared/eventlog/kafka.js';
import { baseTestEnv } from '#test-support/env.js';
import type { EventsRuntimeOverrides } from '../src/live/runtime.js';
import type { RunningApi } from '../src/server.js';
import { createAccount, type TestAccount } from './support/accounts.js';
import { ActivityDb } from './support/activity.js';
import { call } from './support/api.js';
import { startHeldApi, type MaterializerGate } from './support/held-api.js';
import { eventually, ingest, sleep, type IngestedEvent } from './support/events.js';

/** While `held`, every materializer batch of the pods below waits (heartbeating) before it is written. */
const gate: MaterializerGate = { held: false };
const pod = (overrides: Record<string, string>, fanout: EventsRuntimeOverrides['fanout'] = {}): Promise<RunningApi> => startHeldApi(gate, overrides, fanout);

/** A fan-out consumer that joins nothing and dispatches nothing: the pod's fan-out stays where it started. */
const deafFanout: EventsRuntimeOverrides['fanout'] = {
  stallMs: 60_000,
  tailSilenceMs: 60_000,
  newConsumer: (kafka, groupId) => {
    const real = createConsumer(kafka, groupId);
    return Object.assign(Object.create(real) as Consumer, { connect: async () => {}, subscribe: async () => {}, run: async () => {}, disconnect: async () => {}, on: () => () => {}, seek: () => {} });
  },
};

/**
 * A read that starts after an acknowledgement includes it, on every read path
 * (no `since`, `since`, `type`, a cursor older than the tail window, another
 * pod, a pod whose fan-out is behind), or answers 503 with Retry-After: never
 * an empty page that leaves it out (docs/decisions.md, "A read includes every
 * event acknowledged before it").
 *
 * Its own topic (one partition: the window's bounds are exact) and database,
 * so holding these pods' materializers holds every write to MongoDB.
 */
describe('a read includes every event acknowledged before it started', function () {
  this.timeout(90_000);
  const base = baseTestEnv();
  const env = { EVENTS_TOPIC: `${base.EVENTS_TOPIC}-ack`, MONGO_DB: `${base.MONGO_DB}_ack`, EVENTS_PARTITIONS: '1', HANDOFF_TIMEOUT_MS: '1000', WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' };
  const WINDOW = 8;
  /** The pod that acknowledges the events. */
  let a: RunningApi;
  /** Another pod, with its own fan-out. */
  let b: RunningApi;
  /** A pod whose fan-out never moves past its start. */
  let deaf: RunningApi;
  let acct: TestAccount;

  const poll = (api: RunningApi, query = '') => call(api.url, 'GET', `/api/v1/events${query}`, { headers: { 'x-api-key': acct.apiKey } });
  const ids = (body: any): string[] => body.events.map((e: any) => e.id);
  const hold = async (): Promise<void> => {
    gate.held = true;
    await sleep(300); // a batch already past the gate finishes writing
  };
  /** Everything so far is in MongoDB (the watermark reached the last event). */
  const stored = (event: IngestedEvent) => eventually(async () => ((await a.deps.events.watermarks.current(0)) >= decodeCursor(event.cursor).offset ? true : undefined), 30_000);

  before(async () => {
    a = await pod({ ...env, INSTANCE_ID: 'test-ack-a', TAIL_WINDOW_EVENTS: String(WINDOW) });
    b = await pod({ ...env, INSTANCE_ID: 'test-ack-b', TAIL_WINDOW_EVENTS: String(WINDOW) });
    deaf = await pod({ ...env, INSTANCE_ID: 'test-ack-deaf', TAIL_WINDOW_EVENTS: String(WINDOW) }, deafFanout);
  });

  afterEach(() => {
    gate.held = false;
  });

  beforeEach(async () => {
    acct = await createAccount(a.url);
  });

  it('right after the 202, a poll without since, with a type filter, with a cursor and on another pod includes the event', async () => {
    for (let round = 0; round < 5; round++) {
      const [first] = await ingest(a, [{ account_id: acct.userId, type: 'call.started', data: { round } }]);
      const [second] = await ingest(a, [{ account_id: acct.userId, type: 'call.ended', data: { round } }]);
      const [noSince, typed, onB, typedOnB, withCursor] = await Promise.all([
        poll(a, '?limit=100'),
        poll(a, '?type=call.ended&limit=100'),
        poll(b, '?limit=100'),
        poll(b, '?type=call.ended&limit=100'),
        poll(b, `?since=${first!.cursor}`),
      ]);
      for (const [res, want, what] of [
        [noSince, [first!, second!], 'no since'],
        [typed, [second!], 'type filter'],
        [onB, [first!, second!], 'no since, other pod'],
        [typedOnB, [second!], 'type filter, other pod'],
        [withCursor, [second!], 'since, other pod'],
      ] as const) {
        expect(res.status, `${what}: ${JSON.stringify(res.body)}`).to.equal(200);
        expect(ids(res.body), `round ${round}, ${what}`).to.include.members(want.map((s) => s.id));
      }
    }
  });

  it('with the materializer held, the pods answer from their windows; a cursor older than the window and a pod whose fan-out is behind answer 503, never an empty page', async () => {
    const [before] = await ingest(a, [{ account_id: acct.userId, type: 'message.received' }]);
    await stored(before!);
    await hold();
    const sent = await ingest(a, Array.from({ length: WINDOW + 2 }, (_, i) => ({ account_id: acct.userId, type: i === WINDOW ? 'call.ended' : 'call.started', data: { i } })));
    const all = [before!, ...sent];
    const last = sent.at(-1)!;

    // 10 events went by windows of 8: MongoDB's part ends before the window starts.
    for (const api of [a, b]) {
      for (const query of ['?limit=100', '?type=call.ended', `?since=${before!.cursor}`]) {
        const res = await poll(api, query);
        expect(res.status, `${query}, MongoDB held and the window past the watermark: ${JSON.stringify(res.body)}`).to.equal(503);
        expect(res.headers.get('retry-after')).to.match(/^\d+$/);
      }
      const near = await poll(api, `?since=${sent[3]!.cursor}`);
      expect(near.status, 'a cursor the window covers is answered from it').to.equal(200);
      expect(ids(near.body)).to.deep.equal(sent.slice(4).map((s) => s.id));
    }
    const behind = await poll(deaf, `?since=${before!.cursor}`);
    expect(behind.status, `a pod whose fan-out saw none of them: ${JSON.stringify(behind.body)}`).to.equal(503);
    expect(behind.headers.get('retry-after')).to.match(/^\d+$/);
    const behindNoSince = await poll(deaf, '?limit=100');
    expect(behindNoSince.status, `the same without since: ${JSON.stringify(behindNoSince.body)}`).to.equal(503);

    gate.held = false;
    await stored(last);
    for (const api of [a, b, deaf]) {
      expect(ids((await poll(api, '?limit=100')).body)).to.deep.equal(all.map((s) => s.id));
      expect(ids((await poll(api, `?since=${before!.cursor}`)).body)).to.deep.equal(sent.map((s) => s.id));
      expect(ids((await poll(api, '?type=call.ended')).body)).to.deep.equal([sent[WINDOW]!.id]);
    }
  });

  it('with the materializer held and a window that covers the watermark, a poll without since or with a type filter is answered from MongoDB and the window', async () => {
    const [before] = await ingest(a, [{ account_id: acct.userId, type: 'message.received' }]);
    await stored(before!);
    await hold();
    const sent = await ingest(a, [
      { account_id: acct.userId, type: 'call.started' },
      { account_id: acct.userId, type: 'call.ended' },
    ]);
    for (const api of [a, b]) {
      const res = await poll(api, '?limit=100');
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(ids(res.body), 'the stored event, then the two only the window holds').to.deep.equal([before!.id, ...sent.map((s) => s.id)]);
      expect(res.body.cursor).to.equal(sent[1]!.cursor);
      const typed = await poll(api, '?type=call.ended');
      expect(ids(typed.body)).to.deep.equal([sent[1]!.id]);
      const limited = await poll(api, '?limit=1');
      expect(ids(limited.body), 'a full page from MongoDB is complete as it is').to.deep.equal([before!.id]);
    }
    const behind = await poll(deaf, '?limit=100');
    expect(behind.status, `a pod whose fan-out is behind: ${JSON.stringify(behind.body)}`).to.equal(503);
    const full = await poll(deaf, '?limit=1');
    expect(full.status, JSON.stringify(full.body)).to.equal(200);
    expect(ids(full.body), 'but a page that fills before the head is answered').to.deep.equal([before!.id]);
  });

  it('with the materializer held, an event looked up by id (its deliveries, a resend of an attempt of it) is found on every pod whose fan-out reached it; a pod behind answers 503, never 404', async () => {
    const [before] = await ingest(a, [{ account_id: acct.userId, type: 'message.received' }]);
    await stored(before!);
    await hold();
    const [event] = await ingest(a, [{ account_id: acct.userId, type: 'call.completed', data: { call_id: 'held' } }]);
    const deliveriesOf = (api: RunningApi, id: string) => call(api.url, 'GET', `/api/v1/events/${id}/deliveries`, { headers: { 'x-api-key': acct.apiKey } });
    for (const api of [a, b]) {
      const res = await deliveriesOf(api, event!.id);
      expect(res.status, `acknowledged, not yet in MongoDB: ${JSON.stringify(res.body)}`).to.equal(200);
      expect(res.body.event).to.include({ id: event!.id, type: 'call.completed' });
      expect(res.body.event.data).to.deep.equal({ call_id: 'held' });
      expect(res.body.event.cursor).to.equal(event!.cursor);
      const unknown = await deliveriesOf(api, `evt_${'0'.repeat(24)}`);
      expect(unknown.status, 'an id the window does not hold either').to.equal(404);
    }
    const behind = await deliveriesOf(deaf, event!.id);
    expect(behind.status, `a pod whose fan-out is behind: ${JSON.stringify(behind.body)}`).to.equal(503);
    expect(behind.headers.get('retry-after')).to.match(/^\d+$/);

    // A delivery sent at once leaves only its attempt: a resend reads the event by its id.
    const hook = await call(a.url, 'POST', '/api/v1/webhooks', { headers: { 'x-api-key': acct.apiKey }, body: { url: 'https://127.0.0.1/held', events: ['*'] } });
    expect(hook.status, JSON.stringify(hook.body)).to.equal(201);
    const deliveryId = `dlv_${'a'.repeat(24)}`;
    await new ActivityDb(a.deps.mongo.db).attempt({ subscription: hook.body.id, account: acct.userId, event: event!.id, delivery: deliveryId, at: new Date(), outcome: 'ok', status: 200, ms: 5 });
    const resend = await call(b.url, 'POST', `/api/v1/webhooks/${hook.body.id}/deliveries/${deliveryId}/resend`, { headers: { 'x-api-key': acct.apiKey } });
    expect(resend.status, `resend of an attempt whose event is not yet in MongoDB: ${JSON.stringify(resend.body)}`).to.equal(202);
    expect(resend.body.event_id).to.equal(event!.id);
    const queued = await a.deps.mongo.collections.deliveries.findOne({ _id: resend.body.delivery_id });
    expect(JSON.parse(queued!.body)).to.include({ id: event!.id, cursor: event!.cursor });
  });
  it('an event looked up by id once stored is read from its account\'s stream (the events collection holds only its id), also on a pod whose fan-out never saw it; a whole document written before is answered as it is', async () => {
    const [event] = await ingest(a, [{ account_id: acct.userId, type: 'call.completed', data: { call_id: 'stored', n: 7 } }]);
    // More than the window holds after it: the pods' windows no longer cover it.
    const [last] = (await ingest(a, Array.from({ length: WINDOW + 2 }, (_, i) => ({ account_id: acct.userId, type: 'message.received' as const, data: { i } })))).slice(-1);
    await stored(last!);
    const doc = await a.deps.mongo.collections.events.findOne({ _id: event!.id });
    expect(Object.keys(doc ?? {}).sort(), 'no body in the events collection').to.deep.equal(['_id', 'account_id', 'offset', 'partition']);
    const deliveriesOf = (api: RunningApi, id: string) => call(api.url, 'GET', `/api/v1/events/${id}/deliveries`, { headers: { 'x-api-key': acct.apiKey } });
    for (const api of [a, b, deaf]) {
      const res = await deliveriesOf(api, event!.id);
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(res.body.event).to.include({ id: event!.id, type: 'call.completed', cursor: event!.cursor });
      expect(res.body.event.data).to.deep.equal({ call_id: 'stored', n: 7 });
    }
    const other = await createAccount(a.url);
    const foreign = await call(deaf.url, 'GET', `/api/v1/events/${event!.id}/deliveries`, { headers: { 'x-api-key': other.apiKey } });
    expect(foreign.status, "another account's event").to.equal(404);

    // A document of the layout before (the whole event in `events`), at a position no stream holds.
    const old = buildEnvelope({ account_id: acct.userId, type: 'call.started', data: { old: true } }, new Date(Date.now() - 60_000));
    await a.deps.mongo.collections.events.insertOne(toEventDoc(old, { partition: 0, offset: decodeCursor(last!.cursor).offset - 5n }));
    const res = await deliveriesOf(deaf, old.id);
    expect(res.status, JSON.stringify(res.body)).to.equal(200);
    expect(res.body.event).to.include({ id: old.id, type: 'call.started' });
    expect(res.body.event.data).to.deep.equal({ old: true });
  });
  it('an event whose id is stored but not yet its stream nor the watermark (the materializer between its two writes) is waited for as one not stored: the window answers it, a pod behind answers 503, and once the watermark passes it the stream does', async () => {
    const [before] = await ingest(a, [{ account_id: acct.userId, type: 'message.received' }]);
    await stored(before!);
    await hold();
    const [event] = await ingest(a, [{ account_id: acct.userId, type: 'call.completed', data: { call_id: 'between' } }]);
    // What the materializer's first write of the chunk leaves: the id document, nothing in the stream, the watermark below it.
    const at = decodeCursor(event!.cursor);
    await a.deps.mongo.collections.events.insertOne({ _id: event!.id, account_id: acct.userId, partition: at.partition, offset: Number(at.offset) });
    const deliveriesOf = (api: RunningApi) => call(api.url, 'GET', `/api/v1/events/${event!.id}/deliveries`, { headers: { 'x-api-key': acct.apiKey } });
    const fromWindow = await deliveriesOf(a);
    expect(fromWindow.status, JSON.stringify(fromWindow.body)).to.equal(200);
    expect(fromWindow.body.event.data).to.deep.equal({ call_id: 'between' });
    const behind = await deliveriesOf(deaf);
    expect(behind.status, `a pod whose fan-out is behind: ${JSON.stringify(behind.body)}`).to.equal(503);
    gate.held = false;
    await stored(event!);
    const fromStream = await deliveriesOf(deaf);
    expect(fromStream.status, JSON.stringify(fromStream.body)).to.equal(200);
    expect(fromStream.body.event).to.include({ id: event!.id, type: 'call.completed', cursor: event!.cursor });
    expect(fromStream.body.event.data).to.deep.equal({ call_id: 'between' });
  });
});
