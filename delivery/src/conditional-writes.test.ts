import { expect } from 'chai';
import { DueWriteOrder } from '#shared/mongo/delivery-queue.js';
import type { DeliveryDoc } from '#shared/mongo/index.js';
import { releaseLeases, type AttemptRecord, type DeliveryCollections } from './deliveries.js';
import { recordStateOf } from './attempt-docs.js';

type Doc = Record<string, unknown>;

/** Whether `doc` matches a filter of plain equalities, `{$gt}` and `$or` (all these writes use). */
function matches(doc: Doc, filter: Doc): boolean {
  return Object.entries(filter).every(([k, v]) => {
    if (k === '$or') return (v as Doc[]).some((branch) => matches(doc, branch));
    if (v !== null && typeof v === 'object' && '$gt' in v) return (doc[k] as number) > ((v as { $gt: number }).$gt as number);
    return doc[k] === v;
  });
}

/** A deliveries collection holding one delivery; `calls` names each command and its filter's fields. */
function fakeStore(stored: Doc, atomic: boolean) {
  const calls: string[] = [];
  const fields = (f: Doc) => Object.keys(f).join(',');
  const apply = (update: { $set: Doc }) => Object.assign(stored, update.$set);
  const deliveries = {
    findOne: async (f: Doc) => (calls.push(`findOne ${fields(f)}`), matches(stored, f) ? { ...stored } : null),
    updateOne: async (f: Doc, u: { $set: Doc }) => {
      calls.push(`updateOne ${fields(f)}`);
      const hit = matches(stored, f);
      if (hit) apply(u);
      return { matchedCount: hit ? 1 : 0 };
    },
    findOneAndUpdate: async (f: Doc, u: { $set: Doc }) => {
      calls.push(`findOneAndUpdate ${fields(f)}`);
      if (!matches(stored, f)) return null;
      const before = { ...stored };
      apply(u);
      return before;
    },
  };
  const retryDue = { insertOne: async () => (calls.push('insertOne due'), { acknowledged: true }) };
  const c = { deliveries, retryDue, dueWrites: new DueWriteOrder(), conditionalWritesAreAtomic: async () => atomic } as unknown as DeliveryCollections;
  return { c, calls, stored };
}

const held = { _id: 'dlv_1', subscription_id: 'wh_1', claim_seq: 4, lease_owner: 'me', state: 'pending', attempts: 0 };

function attempt(delivery: Doc): AttemptRecord {
  return { delivery: delivery as unknown as DeliveryDoc, attempt: 1, status: 200, outcome: 'ok', error: null, durationMs: 5, at: new Date(1000), nextAttemptAt: null };
}

describe('conditional writes on deliveries: one update on MongoDB, an _id read then an _id write on FerretDB', () => {
  describe('recording an attempt (recordStateOf)', () => {
    it('MongoDB: one update on {_id, claim_seq or a later claim of our own}, which writes only while the claim is ours', async () => {
      const store = fakeStore({ ...held }, true);
      await recordStateOf(store.c, attempt(held));
      expect(store.calls).to.deep.equal(['updateOne _id,$or']);
      expect(store.stored.state).to.equal('succeeded');

      const extended = fakeStore({ ...held, claim_seq: 5 }, true); // our lease keeper's extension landed first
      await recordStateOf(extended.c, attempt(held));
      expect(extended.stored.state).to.equal('succeeded');

      const taken = fakeStore({ ...held, claim_seq: 5, lease_owner: 'other' }, true);
      await recordStateOf(taken.c, attempt(held));
      expect(taken.calls).to.deep.equal(['updateOne _id,$or']);
      expect(taken.stored.state, "another holder's delivery is left alone").to.equal('pending');
    });

    it('MongoDB: a copy held by no owner is fenced by its claim number alone', async () => {
      const store = fakeStore({ ...held, lease_owner: null }, true);
      await recordStateOf(store.c, attempt({ ...held, lease_owner: null }));
      expect(store.calls).to.deep.equal(['updateOne _id,claim_seq']);
      expect(store.stored.state).to.equal('succeeded');
    });

    it('FerretDB: the claim is read by _id, then the state written by _id', async () => {
      const store = fakeStore({ ...held }, false);
      await recordStateOf(store.c, attempt(held));
      expect(store.calls).to.deep.equal(['findOne _id', 'updateOne _id']);
      expect(store.stored.state).to.equal('succeeded');

      const taken = fakeStore({ ...held, claim_seq: 5, lease_owner: 'other' }, false);
      await recordStateOf(taken.c, attempt(held));
      expect(taken.calls).to.deep.equal(['findOne _id']);
      expect(taken.stored.state).to.equal('pending');
    });
  });

  describe('handing leases back (releaseLeases)', () => {
    it('MongoDB: one findOneAndUpdate on {_id, lease_owner, state}; the released delivery is due again', async () => {
      const store = fakeStore({ ...held }, true);
      await releaseLeases(store.c, ['dlv_1'], 'me', new Date());
      expect(store.calls).to.deep.equal(['findOneAndUpdate _id,lease_owner,state', 'insertOne due']);
      expect(store.stored.lease_owner).to.equal(null);

      const taken = fakeStore({ ...held, lease_owner: 'other' }, true);
      await releaseLeases(taken.c, ['dlv_1'], 'me', new Date());
      expect(taken.calls).to.deep.equal(['findOneAndUpdate _id,lease_owner,state']);
      expect(taken.stored.lease_owner, "another holder's lease stays").to.equal('other');
    });

    it('FerretDB: read by _id, then written by _id', async () => {
      const store = fakeStore({ ...held }, false);
      await releaseLeases(store.c, ['dlv_1'], 'me', new Date());
      expect(store.calls).to.deep.equal(['findOne _id', 'updateOne _id', 'insertOne due']);
      expect(store.stored.lease_owner).to.equal(null);

      const taken = fakeStore({ ...held, lease_owner: 'other' }, false);
      await releaseLeases(taken.c, ['dlv_1'], 'me', new Date());
      expect(taken.calls).to.deep.equal(['findOne _id']);
    });

    it('a server whose kind is unknown (no answer) gets the FerretDB form', async () => {
      const store = fakeStore({ ...held }, false);
      store.c.conditionalWritesAreAtomic = async () => {
        throw new Error('buildInfo failed');
      };
      await releaseLeases(store.c, ['dlv_1'], 'me', new Date());
      expect(store.calls[0]).to.equal('findOne _id');
    });
  });
});
