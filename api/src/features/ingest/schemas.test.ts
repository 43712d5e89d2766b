import { expect } from 'chai';
import { parseIngestBody } from './schemas.js';

const limits = { maxBatch: 3, maxDataBytes: 100 };
const ok = { account_id: 'usr_1', type: 'call.started', data: {} };

function problems(body: unknown): string[] {
  try {
    parseIngestBody(body, limits);
  } catch (err) {
    return ((err as { details?: { path: string }[] }).details ?? []).map((d) => d.path);
  }
  return [];
}

describe('ingest body', () => {
  it('accepts one event or a batch', () => {
    expect(parseIngestBody(ok, limits)).to.have.length(1);
    expect(parseIngestBody({ events: [ok, ok] }, limits)).to.have.length(2);
  });

  it('refuses the operational types, which only the service writes', () => {
    expect(problems({ ...ok, type: 'webhook.disabled' })).to.deep.equal(['type']);
    expect(problems({ events: [ok, { ...ok, type: 'webhook.delivery_exhausted' }] })).to.deep.equal(['events[1].type']);
  });

  it('names each bad event by its index', () => {
    expect(problems({ events: [ok, { ...ok, type: 'call.exploded' }, ok] })).to.deep.equal(['events[1].type']);
    expect(problems({ events: [ok, { ...ok, data: { $x: 1 } }] })).to.deep.equal(['events[1].data']);
    expect(problems({ events: [{ ...ok, data: { s: 'x'.repeat(200) } }, { type: 'call.ended', data: {} }] })).to.deep.equal(['events[0].data', 'events[1].account_id']);
    expect(problems({ ...ok, data: 'text' })).to.deep.equal(['data']);
    expect(problems({ ...ok, occurred_at: 'yesterday' })).to.deep.equal(['occurred_at']);
    expect(problems({ ...ok, extra: 1 })).to.deep.equal(['extra']);
  });

  it('refuses what the store would refuse (a poison event would be dead-lettered): nested arrays, $ and dotted keys, NUL in keys', () => {
    expect(problems({ events: [ok, { ...ok, data: { matrix: [[1, 2]] } }] })).to.deep.equal(['events[1].data']);
    expect(problems({ ...ok, data: { list: [{ inner: [[]] }] } })).to.deep.equal(['data']);
    expect(problems({ ...ok, data: { 'a.b': 1 } })).to.deep.equal(['data']);
    expect(problems({ ...ok, data: { nested: { 'k\u0000': 1 } } })).to.deep.equal(['data']);
    expect(parseIngestBody({ ...ok, data: { list: [{ inner: [1, 2] }, 3], 'a$b': 1 } }, { maxBatch: 3, maxDataBytes: 1000 })).to.have.length(1);
  });

  it('refuses a leap second in occurred_at (RFC 3339 allows it, a JavaScript date cannot hold it)', () => {
    expect(problems({ ...ok, occurred_at: '2016-12-31T23:59:60Z' })).to.deep.equal(['occurred_at']);
    expect(problems({ events: [ok, { ...ok, occurred_at: '2020-06-30T23:59:60+00:00' }] })).to.deep.equal(['events[1].occurred_at']);
    expect(parseIngestBody({ ...ok, occurred_at: '2016-12-31T23:59:59.999Z' }, limits)).to.have.length(1);
  });

  it('refuses empty, oversized and mixed batches', () => {
    expect(problems({ events: [] })).to.deep.equal(['events']);
    expect(problems({ events: [ok, ok, ok, ok] })).to.deep.equal(['events']);
    expect(problems({ events: [ok], account_id: 'x' })).to.deep.equal(['body']);
    expect(problems([ok])).to.deep.equal(['body']);
  });
});
