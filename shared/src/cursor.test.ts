import { expect } from 'chai';
import { decodeCursor, encodeCursor, tryDecodeCursor } from './cursor.js';

describe('cursor', () => {
  it('round-trips a position through its opaque form', () => {
    const pos = { partition: 7, offset: 123456789012345n };
    const raw = encodeCursor(pos);
    expect(raw).to.match(/^c1_[A-Za-z0-9_-]+$/);
    expect(tryDecodeCursor(raw)).to.deep.equal(pos);
  });

  it('rejects strings it did not issue', () => {
    for (const bad of ['', 'abc', 'c1_', 'c1_!!!', encodeCursor({ partition: 1, offset: 2n }) + 'x', 'c1_' + Buffer.from('1.-2').toString('base64url'), 'c1_' + Buffer.from('01.2').toString('base64url')]) {
      expect(tryDecodeCursor(bad), bad).to.equal(null);
    }
  });

  it('throws a 400 naming the field for a malformed cursor', () => {
    expect(() => decodeCursor('nope', 'since')).to.throw(/since is not a valid cursor/);
  });
});
