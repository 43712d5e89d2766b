import { expect } from 'chai';
import { byteLimit } from './transport.js';
import { classify, negotiateVersion, paramsObject, versionAtLeast } from './protocol.js';

describe('mcp protocol helpers', () => {
  it('negotiates: echoes a supported version, else offers the latest', () => {
    expect(negotiateVersion('2025-03-26')).to.equal('2025-03-26');
    expect(negotiateVersion('2025-06-18')).to.equal('2025-06-18');
    expect(negotiateVersion('2025-11-25')).to.equal('2025-11-25');
    expect(negotiateVersion('2024-11-05')).to.equal('2025-11-25');
    expect(negotiateVersion('banana')).to.equal('2025-11-25');
  });

  it('orders versions by date', () => {
    expect(versionAtLeast('2025-11-25', '2025-06-18')).to.equal(true);
    expect(versionAtLeast('2025-03-26', '2025-06-18')).to.equal(false);
  });

  it('classifies requests, notifications, responses and junk', () => {
    expect(classify({ jsonrpc: '2.0', id: 1, method: 'ping' })).to.deep.equal({ kind: 'request', id: 1, method: 'ping', params: undefined });
    expect(classify({ jsonrpc: '2.0', method: 'notifications/initialized' }).kind).to.equal('notification');
    expect(classify({ jsonrpc: '2.0', id: 'a', result: {} }).kind).to.equal('response');
    expect(classify({ jsonrpc: '2.0', id: 'a', error: { code: 1, message: 'x' } }).kind).to.equal('response');
    // MCP ids are strings or integers: null and fractions are refused.
    expect(classify({ jsonrpc: '2.0', id: null, method: 'ping' }).kind).to.equal('invalid');
    expect(classify({ jsonrpc: '2.0', id: 1.5, method: 'ping' }).kind).to.equal('invalid');
    expect(classify({ jsonrpc: '2.0', id: 1, method: 'ping', params: null })).to.deep.include({ kind: 'invalid', id: 1 });
    expect(classify([1]).kind).to.equal('invalid');
    expect(classify({ jsonrpc: '2.0', id: 2 })).to.deep.include({ kind: 'invalid', id: 2 });
  });

  it('reads params as an object', () => {
    expect(paramsObject(undefined)).to.deep.equal({});
    expect(() => paramsObject([1])).to.throw(/params must be an object/);
  });

  it('reads body limits in koa-body notation', () => {
    expect(byteLimit('1mb')).to.equal(1024 * 1024);
    expect(byteLimit('512kb')).to.equal(512 * 1024);
    expect(byteLimit('100')).to.equal(100);
    expect(() => byteLimit('lots')).to.throw(/byte size/);
  });
});
