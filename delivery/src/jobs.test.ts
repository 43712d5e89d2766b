import { expect } from 'chai';
import { pino } from 'pino';
import type { DeliveryDoc } from '#shared/mongo/index.js';
import { Jobs, logJob, storeJob, type JobStore } from './jobs.js';

const doc = (id: string, extra: Partial<DeliveryDoc> = {}): DeliveryDoc => ({ _id: id, subscription_id: 'wh_a', ...extra }) as DeliveryDoc;

/** A store that records its writes; `gate` holds inserts until opened. */
function fakeStore(): JobStore & { released: string[][]; inserted: string[][]; open: () => void } {
  let open!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  const store = {
    released: [] as string[][],
    inserted: [] as string[][],
    open,
    release: async (ids: string[]) => void store.released.push(ids),
    insertUnleased: async (docs: DeliveryDoc[]) => {
      await gate;
      store.inserted.push(docs.map((d) => d._id));
    },
  };
  return store;
}

const settled = async (jobs: Jobs): Promise<void> => {
  while (jobs.unsettled > 0) await new Promise((r) => setImmediate(r));
};

describe('jobs: how a log job and a store job finish and go back', () => {
  const log = pino({ level: 'silent' });

  it('finishes a log job by its done, with every copy attached while it was held', () => {
    const jobs = new Jobs(fakeStore(), log);
    const done: string[] = [];
    const first = logJob(doc('d1'), () => done.push('first'));
    jobs.hold(first);
    expect(jobs.holds('d1')).to.equal(true);
    jobs.attach(logJob(doc('d1'), () => done.push('copy')));
    expect(done).to.deep.equal([]);
    jobs.end(first);
    expect(done).to.deep.equal(['first', 'copy']);
    expect(jobs.holds('d1')).to.equal(false);
  });

  it('finishes a store job of an ordered queue by stepping its queue, and one of no queue quietly', () => {
    const jobs = new Jobs(fakeStore(), log);
    const ready: string[] = [];
    jobs.onFifoReady = (s) => ready.push(s);
    const plain = storeJob(doc('d1'));
    const ordered = storeJob(doc('d2', { fifo: true, subscription_id: 'wh_f' }));
    jobs.hold(plain);
    jobs.hold(ordered);
    jobs.end(plain);
    jobs.end(ordered);
    expect(ready).to.deep.equal(['wh_f']);
    expect(jobs.holds('d1') || jobs.holds('d2')).to.equal(false);
  });

  it('hands a store job back by releasing its lease, and a log job by storing it, finished only once stored', async () => {
    const store = fakeStore();
    const jobs = new Jobs(store, log);
    const done: string[] = [];
    const fresh = logJob(doc('d1'), () => done.push('d1'));
    const stored = storeJob(doc('d2'));
    jobs.hold(fresh);
    jobs.hold(stored);
    jobs.handBack([fresh, stored]);
    expect(jobs.holds('d1') || jobs.holds('d2')).to.equal(false);
    await new Promise((r) => setImmediate(r));
    expect(store.released).to.deep.equal([['d2']]);
    expect(done, 'not finished before it is in the store').to.deep.equal([]);
    expect(jobs.unsettled).to.equal(1);
    store.open();
    await settled(jobs);
    expect(store.inserted).to.deep.equal([['d1']]);
    expect(done).to.deep.equal(['d1']);
  });

  it('appends ordered log jobs one write after another, then steps each queue once', async () => {
    const store = fakeStore();
    const jobs = new Jobs(store, log);
    const ready: string[] = [];
    jobs.onFifoReady = (s) => ready.push(s);
    const done: string[] = [];
    jobs.storeFifo([logJob(doc('a1', { subscription_id: 'wh_f' }), () => done.push('a1')), logJob(doc('a2', { subscription_id: 'wh_f' }), () => done.push('a2'))]);
    jobs.storeFifo([logJob(doc('b1', { subscription_id: 'wh_g' }), () => done.push('b1'))]);
    store.open();
    await settled(jobs);
    expect(store.inserted).to.deep.equal([['a1', 'a2'], ['b1']]);
    expect(done).to.deep.equal(['a1', 'a2', 'b1']);
    expect(ready).to.deep.equal(['wh_f', 'wh_g']);
  });

  it('releases queued store jobs at once when asked (shutdown)', async () => {
    const store = fakeStore();
    const jobs = new Jobs(store, log);
    const j = storeJob(doc('d1'));
    jobs.hold(j);
    await jobs.releaseNow([j]);
    expect(store.released).to.deep.equal([['d1']]);
    expect(jobs.holds('d1')).to.equal(false);
  });
});
