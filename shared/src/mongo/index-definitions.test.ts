import { expect } from 'chai';
import type { IndexDescription } from 'mongodb';
import { pino } from 'pino';
import { INDEXES, ensureIndex } from './index.js';

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
