import { expect } from 'chai';
import type { WebhookDoc } from '#shared/mongo/index.js';
import { ACTIVATION_SLACK_MS, SEND_READ_MAX_AGE_MS } from '#shared/subscription-fence.js';
import { SubscriptionTable, type SubscriptionSource } from './subscription-table.js';

const doc = (id: string, account: string): WebhookDoc => ({ _id: id, account_id: account, events: ['*'], url: 'https://x/' + id, created_at: new Date(0) }) as WebhookDoc;

/** An in-memory stand-in for the webhooks collection; `fail` makes the next loads reject. */
function memorySource(docs: WebhookDoc[]): SubscriptionSource & { docs: WebhookDoc[]; fail: boolean } {
  const s = {
    docs,
    fail: false,
    loadAll: async () => {
      if (s.fail) throw new Error('store unavailable');
      return [...s.docs];
    },
  };
  return s;
}

/** Hand-driven wall and monotonic clocks. */
function clocks(wall = 1_000_000, mono = 5_000) {
  const c = { wall, mono, advance: (ms: number) => ((c.wall += ms), (c.mono += ms)) };
  return { c, clocks: { wall: () => c.wall, mono: () => c.mono } };
}

describe('subscription table freshness', () => {
  it('is fresh for no event and no send before its first load', () => {
    const { clocks: k } = clocks();
    const table = new SubscriptionTable(memorySource([doc('wh_a', 'acct_1')]), undefined, k);
    expect(table.forEvents(['acct_1'], 0)).to.equal(null);
    expect(table.forSend('wh_a', 'call.started')).to.equal(null);
  });

  it('serves a batch whose newest event is at most ACTIVATION_SLACK_MS after the load started, by account', async () => {
    const { c, clocks: k } = clocks();
    const table = new SubscriptionTable(memorySource([doc('wh_a', 'acct_1'), doc('wh_b', 'acct_1'), doc('wh_c', 'acct_2')]), undefined, k);
    const startedAt = c.wall;
    await table.load();
    expect(table.loadedFrom).to.equal(startedAt);
    const subs = table.forEvents(['acct_1', 'acct_3'], startedAt + ACTIVATION_SLACK_MS);
    expect(subs).to.not.equal(null);
    expect(subs!.get('acct_1')!.map((s) => s._id)).to.deep.equal(['wh_a', 'wh_b']);
    expect(subs!.has('acct_2')).to.equal(false);
    expect(subs!.get('acct_3')).to.equal(undefined);
    // An event newer than that may have a subscription stored after the load started: query.
    expect(table.forEvents(['acct_1'], startedAt + ACTIVATION_SLACK_MS + 1)).to.equal(null);
  });

  it('measures from when the load started, not when it finished', async () => {
    const { c, clocks: k } = clocks();
    const source = memorySource([doc('wh_a', 'acct_1')]);
    const slow: SubscriptionSource = {
      loadAll: async () => {
        c.advance(2000); // the scan takes 2 s
        return source.loadAll();
      },
    };
    const table = new SubscriptionTable(slow, undefined, k);
    const startedAt = c.wall;
    await table.load();
    expect(table.loadedFrom).to.equal(startedAt);
    expect(table.forEvents(['acct_1'], c.wall)).to.equal(null);
    expect(table.forSend('wh_a', 'call.started'), 'a load started 2 s ago is too old for a send').to.equal(null);
  });

  it('serves a send while the load started at most SEND_READ_MAX_AGE_MS ago, then falls back', async () => {
    const { c, clocks: k } = clocks();
    const table = new SubscriptionTable(memorySource([doc('wh_a', 'acct_1')]), undefined, k);
    const startedMono = c.mono;
    await table.load();
    expect(table.forSend('wh_a', 'call.started')).to.deep.include({ asked: startedMono });
    expect(table.forSend('wh_a', 'call.started')!.sub._id).to.equal('wh_a');
    c.advance(SEND_READ_MAX_AGE_MS);
    expect(table.forSend('wh_a', 'call.started')).to.not.equal(null);
    c.advance(1);
    expect(table.forSend('wh_a', 'call.started')).to.equal(null);
  });

  it('answers a send only when its load lets the send go ahead: absent, disabled or not taking the type means unknown (the store decides), never deleted', async () => {
    const { c, clocks: k } = clocks();
    // The load started before a create or re-enable that the consumer's matching found in the store.
    const table = new SubscriptionTable(
      memorySource([{ ...doc('wh_off', 'acct_1'), enabled: false }, { ...doc('wh_calls', 'acct_1'), events: ['call.started'] }]),
      undefined,
      k,
    );
    await table.load();
    c.advance(SEND_READ_MAX_AGE_MS / 2);
    expect(table.forSend('wh_new', 'call.started'), 'a subscription stored after the load started').to.equal(null);
    expect(table.forSend('wh_off', 'call.started'), 're-enabled after the load started').to.equal(null);
    expect(table.forSend('wh_calls', 'message.sent'), 'given the type after the load started').to.equal(null);
    expect(table.forSend('wh_calls', 'call.started')!.sub._id).to.equal('wh_calls');
  });

  it('sees a deletion and a new subscription at its next load', async () => {
    const { c, clocks: k } = clocks();
    const source = memorySource([doc('wh_a', 'acct_1')]);
    const table = new SubscriptionTable(source, undefined, k);
    await table.load();
    source.docs = [doc('wh_b', 'acct_1')];
    c.advance(250);
    await table.load();
    expect(table.forSend('wh_a', 'call.started'), 'gone from the table: the store is read').to.equal(null);
    expect(table.forSend('wh_b', 'call.started')!.sub._id).to.equal('wh_b');
    expect(table.forEvents(['acct_1'], c.wall)!.get('acct_1')!.map((s) => s._id)).to.deep.equal(['wh_b']);
  });

  it('keeps the previous table when a load fails, and ages out of both rules (callers query the store)', async () => {
    const { c, clocks: k } = clocks();
    const source = memorySource([doc('wh_a', 'acct_1')]);
    const table = new SubscriptionTable(source, undefined, k);
    await table.load();
    const firstFrom = table.loadedFrom;
    source.fail = true;
    c.advance(300);
    await table.load();
    expect(table.failures).to.equal(1);
    expect(table.loadedFrom, 'a failed load does not count as fresh').to.equal(firstFrom);
    expect(table.forSend('wh_a', 'call.started')!.sub._id).to.equal('wh_a');
    c.advance(SEND_READ_MAX_AGE_MS);
    expect(table.forSend('wh_a', 'call.started')).to.equal(null);
    expect(table.forEvents(['acct_1'], c.wall)).to.equal(null);
    source.fail = false;
    await table.load();
    expect(table.forSend('wh_a', 'call.started')).to.not.equal(null);
    expect(table.forEvents(['acct_1'], c.wall)).to.not.equal(null);
  });

  it('shares a load that started less than REFRESH_MS ago between its callers', async () => {
    const { clocks: k } = clocks();
    let calls = 0;
    const table = new SubscriptionTable({ loadAll: async () => (calls++, []) }, undefined, k);
    await Promise.all([table.load(), table.load(), table.load()]);
    expect(calls).to.equal(1);
  });

  it('starts the next load REFRESH_MS after the previous one started, even while that one still runs (two at most), and keeps the latest-started result', async () => {
    const { c, clocks: k } = clocks();
    const pending: { docs: WebhookDoc[]; resolve: (docs: WebhookDoc[]) => void }[] = [];
    const source: SubscriptionSource = { loadAll: () => new Promise((resolve) => pending.push({ docs: [], resolve })) };
    const table = new SubscriptionTable(source, undefined, k);
    const first = table.load();
    const firstMono = c.mono;
    c.advance(250);
    // The store is slow: the first load is still running, the second starts all the same.
    const second = table.load();
    const secondMono = c.mono;
    expect(pending, 'a second load while the first one runs').to.have.length(2);
    c.advance(250);
    expect(table.load(), 'no third one at once: the newest is shared').to.equal(second);
    expect(pending).to.have.length(2);
    // The second lands first; the older first one then changes nothing.
    pending[1]!.resolve([doc('wh_new', 'acct_1')]);
    await second;
    pending[0]!.resolve([doc('wh_old', 'acct_1')]);
    await first;
    expect(table.forSend('wh_new', 'call.started')).to.deep.include({ asked: secondMono });
    expect(table.forSend('wh_old', 'call.started'), 'the earlier-started load does not overwrite the later one').to.equal(null);
    expect(secondMono - firstMono).to.equal(250);
    expect(table.loads).to.equal(2);
  });

  it('reloads on its own until stopped', async () => {
    let calls = 0;
    const table = new SubscriptionTable({ loadAll: async () => (calls++, []) });
    table.start();
    await new Promise((r) => setTimeout(r, 600));
    await table.stop();
    const stoppedAt = calls;
    expect(stoppedAt).to.be.at.least(2);
    await new Promise((r) => setTimeout(r, 400));
    expect(calls).to.equal(stoppedAt);
  });
});
