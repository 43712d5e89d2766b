import { expect } from 'chai';
import type { IndexDescription } from 'mongodb';
import { pino } from 'pino';
import { INDEXES, ensureIndex } from './index.js';
import { commandShapes, servingIndex } from './query-shapes.js';

const log = pino({ level: 'silent' });

/** A collection that answers createIndex as `server` does and records what it was asked. */
function fakeCollection(server: (options: Record<string, unknown>) => { code: number; codeName?: string } | null) {
  const calls: string[] = [];
  const created: Record<string, unknown>[] = [];
  return {
    calls,
    created,
    collection: {
      createIndex: async (_key: unknown, options: Record<string, unknown> = {}) => {
        calls.push(`create ${String(options.name)}${options.partialFilterExpression ? ' partial' : ''}`);
        const err = server(options);
        if (err) throw Object.assign(new Error(err.codeName ?? 'refused'), err);
        created.push(options);
        return String(options.name);
      },
      dropIndex: async (name: string) => {
        calls.push(`drop ${name}`);
        return {};
      },
    },
  };
}

const slotIndex = (): IndexDescription => INDEXES.webhooks.find((i) => i.name === 'account_slot_unique')!;

describe('index definitions', () => {
  it('makes account_slot_unique partial: subscriptions without a slot (older ones) are not indexed as null', () => {
    expect(slotIndex()).to.deep.include({ key: { account_id: 1, slot: 1 }, unique: true, partialFilterExpression: { slot: { $exists: true } } });
  });

  it('creates it over every document where the server has no partial indexes (FerretDB: nulls are distinct there)', async () => {
    const fake = fakeCollection((o) => (o.partialFilterExpression ? { code: 238, codeName: 'NotImplemented' } : null));
    await ensureIndex(fake.collection as never, 'webhooks', slotIndex(), log);
    expect(fake.calls).to.deep.equal(['create account_slot_unique partial', 'create account_slot_unique']);
    expect(fake.created[0]).to.deep.equal({ name: 'account_slot_unique', unique: true });
  });

  it('replaces the plain index an earlier version created (IndexOptionsConflict, IndexKeySpecsConflict) with the partial one', async () => {
    for (const code of [85, 86]) {
      let conflicts = 1;
      const fake = fakeCollection(() => (conflicts-- > 0 ? { code } : null));
      await ensureIndex(fake.collection as never, 'webhooks', slotIndex(), log);
      expect(fake.calls, String(code)).to.deep.equal(['create account_slot_unique partial', 'drop account_slot_unique', 'create account_slot_unique partial']);
      expect(fake.created[0]!.partialFilterExpression).to.deep.equal({ slot: { $exists: true } });
    }
  });

  it('skips a TTL index the server refuses, and throws any other refusal', async () => {
    const ttl = fakeCollection(() => ({ code: 238, codeName: 'NotImplemented' }));
    await ensureIndex(ttl.collection as never, 'ingestKeys', INDEXES.ingestKeys[0]!, log);
    expect(ttl.calls).to.deep.equal(['create expires_ttl']);
    const dup = fakeCollection(() => ({ code: 11000 }));
    let thrown: unknown;
    await ensureIndex(dup.collection as never, 'webhooks', slotIndex(), log).catch((e: unknown) => (thrown = e));
    expect((thrown as { code?: number })?.code).to.equal(11000);
  });
});

describe('index definitions: the queries MongoDB would have scanned or sorted in memory', () => {
  const serving = (collection: keyof typeof INDEXES, filter: Record<string, unknown>, sort?: Record<string, unknown>): (string | null)[] =>
    commandShapes('find', { find: collection, filter, ...(sort ? { sort } : {}) }).map((shape) => servingIndex(shape, INDEXES[collection]));

  it('a partition read by offset (the gap fill, the page backfill)', () => {
    expect(serving('events', { partition: 1, offset: { $gte: 0, $lt: 9 } }, { partition: 1, offset: 1 })).to.deep.equal(['position']);
    expect(serving('events', { partition: 1 }, { offset: 1 })).to.deep.equal(['position']);
  });

  it("an event's deliveries and attempts, oldest first", () => {
    expect(serving('deliveries', { event_id: 'e', account_id: 'a' }, { created_at: 1, _id: 1 })).to.deep.equal(['event']);
    expect(serving('attempts', { event_id: 'e', account_id: 'a' }, { at: 1, _id: 1 })).to.deep.equal(['event']);
  });

  it("a subscription's attempts newest first, and recover's failed deliveries in (created_at, _id) order", () => {
    expect(serving('attempts', { subscription_id: 's' }, { at: -1, _id: -1 })).to.deep.equal(['subscription_recent']);
    const recover = { subscription_id: 's', account_id: 'a', state: 'failed', $or: [{ created_at: { $gt: 1 } }, { created_at: 1, _id: { $gt: 'd' } }] };
    expect(serving('deliveries', recover, { created_at: 1, _id: 1 })).to.deep.equal(['subscription_recent', 'subscription_recent']);
  });

  it("the delivery search: an account's or a subscription's attempts newest first, in [from, to), after a cursor", () => {
    const after = { $or: [{ at: { $lt: 5 } }, { at: 5, _id: { $lt: 'att_x' } }] };
    const newest = { at: -1, _id: -1 };
    expect(serving('attempts', { account_id: 'a' }, newest)).to.deep.equal(['account_recent']);
    expect(serving('attempts', { account_id: 'a', $and: [{ at: { $gte: 1, $lt: 9 } }, after] }, newest)).to.deep.equal(['account_recent', 'account_recent']);
    expect(serving('attempts', { subscription_id: 's', $and: [{ at: { $gte: 1 } }, after] }, newest)).to.deep.equal(['subscription_recent', 'subscription_recent']);
  });

  it("an account's subscriptions in (created_at, _id) order, and the disabled ones counted", () => {
    expect(serving('webhooks', { account_id: 'a' }, { created_at: 1, _id: 1 })).to.deep.equal(['account_created']);
    expect(serving('webhooks', { enabled: false, disabled_reason: 'endpoint_failing' })).to.deep.equal(['disabled']);
  });
});
