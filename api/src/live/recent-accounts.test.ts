import { expect } from 'chai';
import { RecentAccounts } from './recent-accounts.js';

describe('RecentAccounts (what the fan-out saw, per partition)', () => {
  it('vouches that an account has nothing after an offset only from where it has seen everything', () => {
    const r = new RecentAccounts(100);
    expect(r.nothingAfter(0, 'a', 5n), 'partition not started').to.equal(false);
    r.reset(0, 10n);
    r.note(0, 'a', 10n);
    r.note(0, 'b', 11n);
    expect(r.nothingAfter(0, 'a', 10n)).to.equal(true);
    expect(r.nothingAfter(0, 'a', 9n), 'a has offset 10').to.equal(false);
    expect(r.nothingAfter(0, 'c', 9n), 'everything from 10 was seen').to.equal(true);
    expect(r.nothingAfter(0, 'c', 8n), 'offset 9 was never seen').to.equal(false);
    expect(r.nothingAfter(1, 'c', 20n), 'another partition').to.equal(false);
  });

  it('forgets the account seen longest ago past its bound, and stops vouching below what it forgot', () => {
    const r = new RecentAccounts(2);
    r.reset(0, 0n);
    r.note(0, 'a', 0n);
    r.note(0, 'b', 1n);
    r.note(0, 'a', 2n); // a is recent again
    r.note(0, 'c', 3n); // b (last at 1) is forgotten
    expect(r.size()).to.equal(2);
    expect(r.nothingAfter(0, 'b', 0n), 'b may have had offset 1').to.equal(false);
    expect(r.nothingAfter(0, 'b', 1n)).to.equal(true);
    expect(r.nothingAfter(0, 'a', 1n)).to.equal(false);
    expect(r.nothingAfter(0, 'a', 2n)).to.equal(true);
  });

  it('starts over after a gap', () => {
    const r = new RecentAccounts(10);
    r.reset(0, 0n);
    r.note(0, 'a', 0n);
    r.reset(0, 50n);
    expect(r.nothingAfter(0, 'z', 10n)).to.equal(false);
    expect(r.nothingAfter(0, 'a', 49n)).to.equal(true);
    expect(r.size()).to.equal(0);
  });
});
