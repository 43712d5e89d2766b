import { expect } from 'chai';
import type { DeliveryProgressDoc } from '#shared/mongo/index.js';
import { OffsetTracker, type ProgressStore } from './offsets.js';
import { PartitionProgress, Resume } from './partition-progress.js';

/** Offsets 10..14, two deliveries each (`a` fast, `b` slow). */
function partition(): PartitionProgress {
  const p = new PartitionProgress();
  for (let o = 10; o < 15; o++) {
    p.add(String(o), `a${o}`);
    p.add(String(o), `b${o}`);
    p.seen(String(o));
  }
  return p;
}

describe('partition progress above the committed offset', () => {
  it('commits at the lowest unfinished delivery and lists, above it, only what is unfinished', () => {
    const p = partition();
    for (let o = 10; o < 15; o++) p.finish(String(o), `a${o}`);
    p.finish('10', 'b10');
    expect(p.watermark()).to.equal('11');
    const snap = p.snapshot('11');
    expect(snap).to.deep.equal({ from: '11', to: '15', open: ['11', '12', '13', '14'].map((o) => ({ offset: o, ids: [`b${o}`] })) });
  });

  it('starts at the first offset seen before any commit, and writes nothing when nothing was read above the commit', () => {
    const p = partition();
    expect(p.snapshot(null), 'nothing finished yet').to.equal(null);
    p.finish('10', 'a10');
    expect(p.snapshot(null)?.from).to.equal('10');
    for (let o = 10; o < 15; o++) {
      if (o === 10) {
        p.finish('10', 'b10');
        continue;
      }
      p.finish(String(o), `a${o}`);
      p.finish(String(o), `b${o}`);
    }
    expect(p.watermark()).to.equal('15');
    expect(p.snapshot('15')).to.equal(null);
  });

  it('lists at most maxIds open deliveries: the range it vouches for stops before the offset that would exceed them', () => {
    const p = partition();
    for (let o = 10; o < 15; o++) p.finish(String(o), `a${o}`);
    expect(p.snapshot(null, 3)).to.deep.equal({
      from: '10',
      to: '13',
      open: ['10', '11', '12'].map((o) => ({ offset: o, ids: [`b${o}`] })),
    });
  });

  it('stops above the highest offset where anything finished (a long queue of unsent deliveries is not listed)', () => {
    const p = partition();
    p.finish('11', 'a11');
    expect(p.snapshot(null)).to.deep.equal({
      from: '10',
      to: '12',
      open: [
        { offset: '10', ids: ['a10', 'b10'] },
        { offset: '11', ids: ['b11'] },
      ],
    });
    p.finish('13', 'a13');
    p.finish('13', 'b13');
    expect(p.snapshot(null)?.to).to.equal('14');
  });

  it('a copy added twice (a re-read in the same generation) is finished only when both copies are', () => {
    const p = new PartitionProgress();
    p.add('5', 'x');
    p.add('5', 'x');
    p.seen('5');
    p.finish('5', 'x');
    expect(p.watermark()).to.equal('5');
    p.finish('5', 'x');
    expect(p.watermark()).to.equal('6');
  });
});

describe('resuming from a progress document', () => {
  const doc = { from: '11', to: '15', open: [{ offset: '12', ids: ['b12'] }] };

  it('skips what the document calls finished, sends what it lists as open and everything outside its range', () => {
    const r = new Resume(doc);
    expect(r.finished('11', 'a11')).to.equal(true);
    expect(r.finished('12', 'a12')).to.equal(true);
    expect(r.finished('12', 'b12')).to.equal(false);
    expect(r.finished('10', 'a10')).to.equal(false);
    expect(r.finished('15', 'a15')).to.equal(false);
  });

  it('does not apply when the group starts reading below it (its offsets were reset: a replay) or past it', () => {
    const r = new Resume(doc);
    expect(r.appliesFrom('11')).to.equal(true);
    expect(r.appliesFrom('13')).to.equal(true);
    expect(r.appliesFrom('10')).to.equal(false);
    expect(r.appliesFrom('15')).to.equal(false);
  });
});

describe('offset tracker progress documents', () => {
  function memoryStore(): ProgressStore & { docs: Map<string, DeliveryProgressDoc>; writes: number } {
    const docs = new Map<string, DeliveryProgressDoc>();
    const store = {
      docs,
      writes: 0,
      read: async (id: string) => docs.get(id) ?? null,
      write: async (doc: DeliveryProgressDoc) => {
        store.writes++;
        docs.set(doc._id, structuredClone(doc));
      },
    };
    return store;
  }

  it('writes one document per partition after deliveries finish, which the next owner resumes from', async () => {
    const store = memoryStore();
    const a = new OffsetTracker('events', { store, group: 'g' });
    const p = a.of(3);
    for (let o = 0; o < 100; o++) {
      p.add(String(o), `fast${o}`);
      p.add(String(o), `slow${o}`);
      p.seen(String(o));
    }
    for (let o = 0; o < 100; o++) p.finish(String(o), `fast${o}`);
    await new Promise((r) => setTimeout(r, 30));
    await a.writeProgress();
    expect(store.writes).to.equal(1); // 100 deliveries finished at once: one write
    const doc = store.docs.get('g|events|3');
    expect(doc?.open).to.have.length(100);

    // The next owner (another process, or this one restarted) reads it before its first batch.
    const b = new OffsetTracker('events', { store, group: 'g' });
    await b.resume(3, '0');
    const resumed = b.of(3).resume;
    expect(resumed?.finished('42', 'fast42')).to.equal(true);
    expect(resumed?.finished('42', 'slow42')).to.equal(false);
    // Another group's owner finds nothing.
    const other = new OffsetTracker('events', { store, group: 'h' });
    await other.resume(3, '0');
    expect(other.of(3).resume?.finished('42', 'fast42')).to.equal(false);
  });

  it('an old generation writes nothing once the tracker was reset (a rebalance)', async () => {
    const store = memoryStore();
    const t = new OffsetTracker('events', { store, group: 'g' });
    const old = t.of(0);
    old.add('0', 'x');
    old.add('0', 'y');
    old.seen('0');
    t.reset();
    old.finish('0', 'x');
    await new Promise((r) => setTimeout(r, 30));
    await t.writeProgress();
    expect(store.writes).to.equal(0);
  });
});
