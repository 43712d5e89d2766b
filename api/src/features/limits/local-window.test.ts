import { expect } from 'chai';
import { admitLocally, decide, localCap, newCounts, startWrite, writeFailed, writeSucceeded, type LocalCounts, type LocalPolicy } from './local-window.js';

const policy: LocalPolicy = { limit: 100, cap: 5, margin: 5 };

describe('local counting of a shared window (pure)', () => {
  it('writes the first request of a window, then admits locally up to the cap of unconfirmed requests', () => {
    const c = newCounts();
    expect(decide(c, policy, true)).to.equal('write');
    startWrite(c);
    writeSucceeded(c, 1);
    for (let i = 0; i < 5; i++) {
      expect(decide(c, policy, true)).to.equal('local');
      expect(admitLocally(c, policy)).to.equal(100 - 1 - (i + 1));
    }
    expect(decide(c, policy, true), 'cap reached: the next goes to the store').to.equal('write');
    expect(startWrite(c)).to.equal(5);
    expect(decide(c, policy, true), 'still unconfirmed while the write is in flight').to.equal('write');
    writeSucceeded(c, 7);
    expect(decide(c, policy, true)).to.equal('local');
  });

  it('stops admitting locally at the margin below the limit and refuses without a write once the window is spent', () => {
    const c = newCounts();
    startWrite(c);
    writeSucceeded(c, 93);
    expect(decide(c, policy, true)).to.equal('local'); // 93 + 1 <= 95
    admitLocally(c, policy);
    expect(decide(c, policy, true)).to.equal('local'); // 93 + 1 + 1 <= 95
    admitLocally(c, policy);
    expect(decide(c, policy, true)).to.equal('write'); // 93 + 2 + 1 > 95
    startWrite(c);
    writeSucceeded(c, 99);
    expect(decide(c, policy, true)).to.equal('write');
    writeSucceeded(c, 100);
    expect(decide(c, policy, true)).to.equal('refuse');
    writeSucceeded(c, 90); // an older answer never lowers what is known
    expect(decide(c, policy, true)).to.equal('refuse');
  });

  it('after a failed write, keeps what was admitted owed and writes every request until a write succeeds', () => {
    const c = newCounts();
    startWrite(c);
    writeSucceeded(c, 1);
    admitLocally(c, policy);
    admitLocally(c, policy);
    expect(startWrite(c)).to.equal(2);
    admitLocally(c, policy);
    writeFailed(c);
    expect(c.pending, 'the two of the failed write and the one admitted meanwhile').to.equal(3);
    expect(decide(c, policy, false)).to.equal('write');
    expect(startWrite(c)).to.equal(3);
  });

  it('with a cap of 0 writes every request (exact mode) and the cap is 5% of a limit (0 below 20)', () => {
    const c = newCounts();
    startWrite(c);
    writeSucceeded(c, 500);
    expect(decide(c, { limit: 10, cap: 0, margin: 0 }, true)).to.equal('write');
    expect([localCap(100), localCap(600), localCap(19), localCap(10)]).to.deep.equal([5, 30, 0, 0]);
  });

  /**
   * N processes and one store, every interleaving chosen at random: requests
   * arriving, writes applied by the store, answers coming back, flushes. In
   * every run a window admits at least min(requests, limit) and at most
   * limit + N * cap (the bound docs/api.md states).
   */
  it('never admits more than limit + processes × cap, nor fewer than the limit, under random interleavings', () => {
    let seed = 42;
    const rand = (n: number): number => {
      seed = (Math.imul(seed, 1103515245) + 12345) & 0x7fffffff;
      return (seed >>> 16) % n;
    };
    interface Write {
      n: number;
      sync: number;
      total: number | null;
    }
    interface Proc {
      c: LocalCounts;
      waiting: number;
      write: Write | null;
    }
    let worst = 0;
    for (let run = 0; run < 400; run++) {
      const n = 1 + rand(4);
      const limit = 20 + rand(200);
      const p: LocalPolicy = { limit, cap: localCap(limit), margin: localCap(limit) };
      const procs: Proc[] = Array.from({ length: n }, () => ({ c: newCounts(), waiting: 0, write: null }));
      let store = 0;
      let admitted = 0;
      let requests = 0;
      const start = (pr: Proc): void => {
        const locals = startWrite(pr.c);
        pr.write = { n: locals + pr.waiting, sync: pr.waiting, total: null };
        pr.waiting = 0;
      };
      const steps = limit * 4;
      for (let step = 0; step < steps * 3 || procs.some((pr) => pr.write || pr.c.pending || pr.waiting); step++) {
        const pr = procs[rand(n)]!;
        const draining = step >= steps * 3;
        const action = rand(4);
        if (action === 0 && !draining) {
          requests++;
          const d = decide(pr.c, p, true);
          if (d === 'local') {
            admitLocally(pr.c, p);
            admitted++;
          } else if (d === 'write') {
            pr.waiting++;
            if (!pr.write) start(pr);
          }
        } else if (action === 1 && pr.write && pr.write.total === null) {
          store += pr.write.n;
          pr.write.total = store;
        } else if (action === 2 && pr.write && pr.write.total !== null) {
          const { total, sync } = pr.write;
          writeSucceeded(pr.c, total);
          for (let i = 0; i < sync; i++) if (total - sync + i + 1 <= limit) admitted++;
          pr.write = null;
          if (pr.waiting > 0) start(pr);
        } else if (action === 3 && !pr.write && pr.c.pending > 0) {
          start(pr);
        }
      }
      expect(admitted, `run ${run}: ${n} processes, limit ${limit}`).to.be.at.most(limit + n * p.cap);
      expect(admitted, `run ${run}`).to.be.at.least(Math.min(requests, limit));
      worst = Math.max(worst, (admitted - limit) / (n * p.cap));
    }
    // Some run reaches the bound exactly: it is tight, not a loose guess.
    expect(worst).to.equal(1);
  });
});
