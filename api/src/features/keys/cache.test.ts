/**
 * The key cache's rules, on in-memory stand-ins for its two collections and
 * a clock the test moves (the two-process behaviour on FerretDB is in
 * api/test/key-cache.test.ts).
 */
import { expect } from 'chai';
import type { Collection } from 'mongodb';
import { KeyCache, KEY_EPOCH_ID } from './cache.js';
import type { ApiPodDoc, KeyEpochDoc } from '#shared/mongo/index.js';
import { createLogger } from '#shared/log.js';

interface Store {
  epoch: KeyEpochDoc | null;
  pods: Map<string, ApiPodDoc>;
}

function collections(store: Store): { epoch: Collection<KeyEpochDoc>; pods: Collection<ApiPodDoc> } {
  const epoch = {
    findOne: () => Promise.resolve(store.epoch && structuredClone(store.epoch)),
    updateOne: (_f: unknown, u: { $set: Record<string, Date> }) => {
      store.epoch ??= { _id: KEY_EPOCH_ID, seq: 0 };
      for (const [k, v] of Object.entries(u.$set)) (store.epoch.pending ??= {})[k.slice('pending.'.length)] = v;
      return Promise.resolve();
    },
    findOneAndUpdate: (_f: unknown, u: { $inc: { seq: number }; $unset?: Record<string, ''> }) => {
      store.epoch ??= { _id: KEY_EPOCH_ID, seq: 0 };
      store.epoch.seq += u.$inc.seq;
      for (const k of Object.keys(u.$unset ?? {})) delete store.epoch.pending?.[k.slice('pending.'.length)];
      return Promise.resolve(structuredClone(store.epoch));
    },
  };
  const pods = {
    updateOne: (f: { _id: string }, u: { $set: Omit<ApiPodDoc, '_id'> }) => {
      store.pods.set(f._id, { _id: f._id, ...u.$set });
      return Promise.resolve();
    },
    find: () => ({ toArray: () => Promise.resolve([...store.pods.values()]) }),
    deleteOne: (f: { _id: string }) => Promise.resolve(store.pods.delete(f._id)),
  };
  return { epoch: epoch as unknown as Collection<KeyEpochDoc>, pods: pods as unknown as Collection<ApiPodDoc> };
}

describe('KeyCache', () => {
  let now: number;
  let store: Store;
  const make = (instanceId: string): KeyCache =>
    new KeyCache({ instanceId, ...collections(store), log: createLogger('test', 'silent'), syncMs: 100, leaseMs: 1000, maxEntries: 2, now: () => now, wall: () => new Date(now) });

  beforeEach(() => {
    now = 1_000_000;
    store = { epoch: null, pods: new Map() };
  });

  it('answers nothing before its first sync, and nothing once its lease has lapsed', async () => {
    const cache = make('a');
    cache.fill('h1', 'acct', cache.fillToken());
    expect(cache.get('h1')).to.equal(undefined);
    await cache.sync();
    cache.fill('h1', 'acct', cache.fillToken());
    expect(cache.get('h1')).to.equal('acct');
    now += 999;
    expect(cache.get('h1')).to.equal('acct');
    now += 1;
    expect(cache.get('h1'), 'lease lapsed').to.equal(undefined);
    await cache.sync();
    expect(cache.get('h1'), 'renewed, nothing changed').to.equal('acct');
  });

  it('a lookup that began before a key change does not fill the cache after it', async () => {
    const a = make('a');
    const b = make('b');
    await Promise.all([a.sync(), b.sync()]);
    const token = b.fillToken(); // B starts reading the old key from the store...
    const change = await a.beginChange();
    const published = a.publishChange(change);
    await b.sync(); // ...B applies the change...
    b.fill('old', 'acct', token); // ...and only then its read returns
    expect(b.get('old')).to.equal(undefined);
    expect((await published).waitedFor).to.deep.equal([]);
  });

  it('a rotation waits for every live process to apply it, and no longer than the lease for one that does not', async () => {
    const a = make('a');
    const b = make('b');
    await Promise.all([a.sync(), b.sync()]);
    b.fill('old', 'acct', b.fillToken());
    let done = false;
    const published = a.publishChange(await a.beginChange()).then((r) => {
      done = true;
      return r;
    });
    await new Promise((r) => setTimeout(r, 30));
    expect(done, 'B has not acknowledged').to.equal(false);
    await b.sync();
    expect(b.get('old')).to.equal(undefined);
    expect((await published).waitedFor).to.deep.equal([]);

    // B stops syncing: A gives up waiting once B's lease (from B's last sync) has lapsed.
    b.fill('old2', 'acct', b.fillToken());
    b.held = true;
    const second = a.publishChange(await a.beginChange());
    await new Promise((r) => setTimeout(r, 30));
    now += 1000;
    expect((await second).waitedFor).to.deep.equal(['b']);
    expect(b.get('old2'), 'B no longer answers').to.equal(undefined);
  });

  it('a change marked but never published stops every cache until its mark lapses', async () => {
    const a = make('a');
    const b = make('b');
    await Promise.all([a.sync(), b.sync()]);
    b.fill('old', 'acct', b.fillToken());
    await a.beginChange(5000); // the rotating process dies before publishing
    await b.sync();
    expect(b.get('old')).to.equal(undefined);
    b.fill('x', 'acct', b.fillToken());
    expect(b.get('x'), 'no fills while a change is in flight').to.equal(undefined);
    now += 5001;
    await b.sync();
    b.fill('y', 'acct', b.fillToken());
    expect(b.get('y')).to.equal('acct');
  });

  it('keeps at most maxEntries keys', async () => {
    const cache = make('a');
    await cache.sync();
    for (const h of ['h1', 'h2', 'h3']) cache.fill(h, 'acct', cache.fillToken());
    expect(cache.size).to.equal(2);
    expect(cache.get('h1')).to.equal(undefined);
    expect(cache.get('h3')).to.equal('acct');
  });
});
