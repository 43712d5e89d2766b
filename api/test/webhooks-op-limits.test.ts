/**
 * The account's limits on what resend, recover and replay queue
 * (features/webhooks/op-admission.ts): pending operation deliveries, and
 * operation deliveries per minute. No delivery process runs here, so what is
 * queued stays pending.
 */
import { expect } from 'chai';
import { tryDecodeCursor } from '#shared/cursor.js';
import type { DeliveryDoc, WatermarkDoc } from '#shared/mongo/index.js';
import { operationLimits } from '../src/features/webhooks/op-admission.js';
import type { RunningApi } from '../src/server.js';
import { bearer, createAccount, type TestAccount } from './support/accounts.js';
import { call } from './support/api.js';
import { eventually } from './support/events.js';
import { webhookApi, webhookTestEnv } from './support/webhooks.js';

describe('limits on resend, recover and replay', function () {
  this.timeout(90_000);
  let api: RunningApi;
  const saved = { ...operationLimits };

  const deliveries = () => api.deps.mongo.collections.deliveries;
  const ingest = async (acct: TestAccount): Promise<{ id: string; cursor: string }> => {
    const res = await call(api.url, 'POST', '/internal/v1/events', { headers: bearer(api.deps.config.ingestToken), body: { account_id: acct.userId, type: 'call.started', data: {} } });
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    return res.body.events[0];
  };
  const stored = async (cursor: string): Promise<void> => {
    const pos = tryDecodeCursor(cursor)!;
    const watermarks = api.deps.mongo.collections.watermarks as unknown as { findOne(f: object): Promise<WatermarkDoc | null> };
    await eventually(async () => {
      const w = await watermarks.findOne({ _id: `${webhookTestEnv().EVENTS_TOPIC}:${pos.partition}` });
      return w !== null && BigInt(w.offset) >= pos.offset ? true : undefined;
    }, 60_000, 100);
  };
  /** An account with a subscription and `n` events after the cursor `since`. */
  const setup = async (n: number): Promise<{ acct: TestAccount; sub: string; since: string; cursors: string[] }> => {
    const acct = await createAccount(api.url);
    const first = await ingest(acct);
    const cursors: string[] = [];
    for (let i = 0; i < n; i++) cursors.push((await ingest(acct)).cursor);
    await stored(cursors.at(-1)!);
    const res = await call(api.url, 'POST', '/api/v1/webhooks', { headers: bearer(acct.apiKey), body: { url: 'https://127.0.0.1/op-limits', events: ['call.started'] } });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    return { acct, sub: res.body.id, since: first.cursor, cursors };
  };
  const post = (acct: TestAccount, path: string, body?: unknown) => call(api.url, 'POST', `/api/v1/webhooks${path}`, { headers: bearer(acct.apiKey), body });
  const queuedFor = (sub: string): Promise<DeliveryDoc[]> => deliveries().find({ subscription_id: sub }).toArray();
  const expect429 = (res: { status: number; body: any; headers: Headers }, limit: RegExp): void => {
    expect(res.status, JSON.stringify(res.body)).to.equal(429);
    expect(res.body.error.code).to.equal('rate_limited');
    expect(res.body.error.message).to.match(limit);
    expect(res.body.error.request_id).to.be.a('string');
    expect(res.body.error.details[0].path).to.equal('deliveries');
    expect(Number(res.headers.get('retry-after'))).to.be.greaterThan(0);
  };

  before(async function () {
    this.timeout(120_000);
    ({ api } = await webhookApi());
  });
  afterEach(() => Object.assign(operationLimits, saved));

  it('answers 429 naming the pending cap, and queues nothing, when a call would take the account past it', async () => {
    Object.assign(operationLimits, { maxPending: 3, perMinute: 1000 });
    const { acct, sub, since, cursors } = await setup(4);
    // 4 events after since: past the cap of 3, so none is queued.
    expect429(await post(acct, `/${sub}/replay`, { since }), /at most 3 resend, recover and replay deliveries of an account may be pending|more than the 3 pending/);
    expect(await queuedFor(sub)).to.have.length(0);

    const two = await post(acct, `/${sub}/replay`, { since, until: cursors[1] });
    expect(two.status, JSON.stringify(two.body)).to.equal(202);
    expect(two.body.queued).to.equal(2);
    // 2 pending + 2 more is past 3: nothing of this call is queued.
    expect429(await post(acct, `/${sub}/replay`, { since: cursors[1] }), /at most 3 resend, recover and replay deliveries of an account may be pending \(2 pending, this call would queue 2\)/);
    const pending = await queuedFor(sub);
    expect(pending).to.have.length(2);
    // Up to the cap exactly: one resend fits, the next does not.
    expect((await post(acct, `/${sub}/deliveries/${pending[0]!._id}/resend`)).status).to.equal(202);
    expect429(await post(acct, `/${sub}/deliveries/${pending[0]!._id}/resend`), /\(3 pending, this call would queue 1\)/);
    expect(await queuedFor(sub)).to.have.length(3);
  });

  it('charges the per-minute budget per queued delivery: 429 naming it, nothing queued', async () => {
    Object.assign(operationLimits, { maxPending: 1000, perMinute: 3 });
    const { acct, sub, since, cursors } = await setup(4);
    // Both calls in one minute window.
    const intoMinute = Date.now() % 60_000;
    if (intoMinute > 45_000) await new Promise((r) => setTimeout(r, 60_000 - intoMinute + 100));
    const two = await post(acct, `/${sub}/replay`, { since, until: cursors[1] });
    expect(two.status, JSON.stringify(two.body)).to.equal(202);
    expect429(await post(acct, `/${sub}/replay`, { since: cursors[1] }), /3 resend, recover and replay deliveries per minute per account \(2 queued this minute, this call would queue 2\)/);
    expect(await queuedFor(sub)).to.have.length(2);
  });
});
