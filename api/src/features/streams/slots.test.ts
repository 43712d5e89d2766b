import { expect } from 'chai';
import { conditionalWritesAreAtomic } from '#shared/mongo/index.js';
import { StreamSlots } from './slots.js';

/** A slots collection holding one slot, recording each call with its filter. */
function fakeSlots(leaseId: string) {
  const calls: string[] = [];
  const slot = { _id: 'acct:0', lease_id: leaseId };
  const matches = (f: Record<string, unknown>) => f._id === slot._id && (f.lease_id === undefined || f.lease_id === slot.lease_id);
  return {
    calls,
    slot,
    collection: {
      findOne: async (f: Record<string, unknown>) => (calls.push(`findOne ${Object.keys(f).join(',')}`), matches(f) ? slot : null),
      updateOne: async (f: Record<string, unknown>) => (calls.push(`updateOne ${Object.keys(f).join(',')}`), { matchedCount: matches(f) ? 1 : 0 }),
    },
  };
}

const slotsOn = (collection: unknown, atomic: boolean) => new StreamSlots(collection as never, { max: 6, ttlMs: 10_000, holder: 'p1', clock: () => new Date(), atomicConditionalWrites: async () => atomic });

describe('stream slot renewal', () => {
  it('is one conditional update on {_id, lease_id} where that is atomic (MongoDB)', async () => {
    const fake = fakeSlots('mine');
    expect(await slotsOn(fake.collection, true).renew({ slotId: 'acct:0', leaseId: 'mine', accountId: 'acct' })).to.equal(true);
    expect(fake.calls).to.deep.equal(['updateOne _id,lease_id']);
    // Taken over by another lease: nothing is extended, the stream must end.
    fake.slot.lease_id = 'theirs';
    expect(await slotsOn(fake.collection, true).renew({ slotId: 'acct:0', leaseId: 'mine', accountId: 'acct' })).to.equal(false);
    expect(fake.calls.slice(1)).to.deep.equal(['updateOne _id,lease_id']);
  });

  it('is an _id read, then an _id write, on FerretDB (a conditional filter scans there, and is not atomic)', async () => {
    const fake = fakeSlots('mine');
    expect(await slotsOn(fake.collection, false).renew({ slotId: 'acct:0', leaseId: 'mine', accountId: 'acct' })).to.equal(true);
    expect(fake.calls).to.deep.equal(['findOne _id', 'updateOne _id']);
    fake.slot.lease_id = 'theirs';
    expect(await slotsOn(fake.collection, false).renew({ slotId: 'acct:0', leaseId: 'mine', accountId: 'acct' })).to.equal(false);
    expect(fake.calls.slice(2)).to.deep.equal(['findOne _id']);
  });

  it('tells MongoDB from FerretDB by buildInfo, once per database handle', async () => {
    let asked = 0;
    const db = (info: Record<string, unknown>) => ({ admin: () => ({ command: async () => (asked++, info) }) }) as never;
    const mongo = db({ version: '7.0.14' });
    expect(await conditionalWritesAreAtomic(mongo)).to.equal(true);
    expect(await conditionalWritesAreAtomic(mongo)).to.equal(true);
    expect(asked).to.equal(1);
    expect(await conditionalWritesAreAtomic(db({ version: '7.0.42', ferretdbVersion: 'v1.24.2' }))).to.equal(false);
  });
});
