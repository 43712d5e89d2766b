import { expect } from 'chai';
import { byteLimit } from './transport.js';

describe('mcp transport helpers', () => {
  it('reads body limits in koa-body notation', () => {
    expect(byteLimit('1mb')).to.equal(1024 * 1024);
    expect(byteLimit('512kb')).to.equal(512 * 1024);
    expect(byteLimit('100')).to.equal(100);
    expect(() => byteLimit('lots')).to.throw(/byte size/);
  });
});
