import { expect } from 'chai';
import { decodeCursor } from '../cursor.js';
import { buildEnvelope, checkEventData, decodeEnvelope, decodeEnvelopeText, docToRecord, encodeEnvelope, newEventId, peekEnvelopeId, toEventDoc, toRecord } from './envelope.js';
import { assignPositions } from './event-log.js';
import { partitionForKey } from './kafka.js';

describe('event envelope', () => {
  it('gives every event a distinct evt_ id of 12 random bytes, across refills of the random pool', () => {
    const ids = Array.from({ length: 5000 }, () => newEventId());
    expect(new Set(ids).size).to.equal(ids.length);
    for (const id of ids) expect(id).to.match(/^evt_[0-9a-f]{24}$/);
  });

  const now = new Date('2026-01-02T03:04:05.678Z');

  it('assigns an evt_ id and the API time, and normalizes occurred_at', () => {
    const e = buildEnvelope({ account_id: 'usr_1', type: 'call.started', data: { a: 1 }, occurred_at: '2026-01-02T04:00:00+01:00' }, now);
    expect(e.id).to.match(/^evt_[0-9a-f]{24}$/);
    expect(e.created_at).to.equal('2026-01-02T03:04:05.678Z');
    expect(e.occurred_at).to.equal('2026-01-02T03:00:00.000Z');
    expect(buildEnvelope({ account_id: 'usr_1', type: 'call.started', data: {} }, now).id).to.not.equal(e.id);
  });

  it('gives the same record from the topic and from MongoDB', () => {
    const e = buildEnvelope({ account_id: 'usr_1', type: 'message.received', data: { text: 'hi', n: [1, { b: null }] }, occurred_at: '2026-01-01T00:00:00Z' }, now);
    const position = { partition: 2, offset: 41n };
    const fromTopic = toRecord(decodeEnvelope(encodeEnvelope(e))!, position);
    const fromStore = docToRecord(toEventDoc(e, position));
    expect(JSON.stringify(fromStore)).to.equal(JSON.stringify(fromTopic));
    expect(Object.keys(fromTopic)).to.deep.equal(['id', 'type', 'created_at', 'occurred_at', 'data', 'cursor']);
    expect(decodeCursor(fromTopic.cursor)).to.deep.equal(position);
    const plain = toRecord(buildEnvelope({ account_id: 'usr_1', type: 'call.ended', data: {} }, now), position);
    expect(Object.keys(plain)).to.deep.equal(['id', 'type', 'created_at', 'data', 'cursor']);
  });

  it('refuses a message that is not an envelope', () => {
    expect(decodeEnvelope(Buffer.from('nope'))).to.equal(null);
    expect(decodeEnvelope(Buffer.from('{"id":"x"}'))).to.equal(null);
    expect(decodeEnvelope(Buffer.from(JSON.stringify({ id: 'e', account_id: 'a', type: 'bogus', created_at: 'x', data: {} })))).to.equal(null);
    expect(decodeEnvelope(null)).to.equal(null);
  });

  it('refuses data MongoDB could not store, so no event can stall the materializer', () => {
    expect(checkEventData({ ok: { nested: [1, 2] } })).to.equal(null);
    expect(checkEventData([])).to.match(/JSON object/);
    expect(checkEventData({ $where: 1 })).to.match(/\$where/);
    expect(checkEventData({ a: [{ 'b.c': 1 }] })).to.match(/b\.c/);
    expect(checkEventData({ 'a\0': 1 })).to.match(/NUL/);
    let deep: Record<string, unknown> = {};
    for (let i = 0; i < 40; i++) deep = { d: deep };
    expect(checkEventData(deep)).to.match(/nested deeper/);
    expect(checkEventData({ s: 'x'.repeat(70_000) })).to.match(/limit is 65536/);
    expect(checkEventData({ s: 'x'.repeat(100) }, 50)).to.match(/limit is 50/);
  });

  it('refuses data nested 200,000 deep without overflowing the stack (JSON.stringify would)', () => {
    const depth = 200_000;
    const arrays = JSON.parse(`{"a":${'['.repeat(depth)}${']'.repeat(depth)}}`);
    const objects = JSON.parse(`${'{"x":'.repeat(depth)}1${'}'.repeat(depth)}`);
    // Refused as soon as an array holds an array (the store refuses those too), before any depth is reached.
    expect(checkEventData(arrays)).to.match(/nested deeper than 32|array directly inside an array/);
    expect(checkEventData(JSON.parse(`{"a":${'[{"b":'.repeat(depth)}1${'}]'.repeat(depth)}}`))).to.match(/nested deeper than 32/);
    expect(checkEventData(objects)).to.match(/nested deeper than 32/);
  });
});

describe('peekEnvelopeId (the id of an envelope without parsing it)', () => {
  const envelope = buildEnvelope({ account_id: 'usr_abc', type: 'call.started', data: { text: 'a "quoted" \\ text', n: 1 } }, new Date('2026-01-01T00:00:00Z'));
  const text = encodeEnvelope(envelope).toString('utf8');

  it('reads the id of every envelope encodeEnvelope writes, when its account is the one named', () => {
    expect(peekEnvelopeId(text, 'usr_abc')).to.equal(envelope.id);
    expect(decodeEnvelopeText(text)).to.deep.equal(envelope);
    const withOptional = buildEnvelope({ account_id: 'usr_abc', type: 'webhook.ping', data: {}, occurred_at: '2026-01-01T00:00:00Z', target_subscription_id: 'sub_1' }, new Date());
    expect(peekEnvelopeId(encodeEnvelope(withOptional).toString('utf8'), 'usr_abc')).to.equal(withOptional.id);
  });

  it('says null for another account (a key that is not the envelope\'s account), or a prefix of it', () => {
    expect(peekEnvelopeId(text, 'usr_ab')).to.equal(null);
    expect(peekEnvelopeId(text, 'usr_abcd')).to.equal(null);
    expect(peekEnvelopeId(text, 'other')).to.equal(null);
  });

  it('says null for any text that does not start the way encodeEnvelope writes (parse it whole instead)', () => {
    for (const other of [
      '',
      'not json',
      '{"account_id":"usr_abc","id":"evt_1","type":"call.started"}',
      '{"id":"","account_id":"usr_abc","type":"call.started"}',
      '{"id":"evt_\\"x","account_id":"usr_abc","type":"call.started"}',
      '{"id": "evt_1","account_id":"usr_abc","type":"call.started"}',
      '{"id":"evt_1","account_id":"usr_abc"}',
      '{"id":"evt_1"',
    ]) expect(peekEnvelopeId(other, 'usr_abc'), other).to.equal(null);
  });
});

describe('event positions', () => {
  it('places an account on one fixed partition and spreads accounts over all of them', () => {
    const p = partitionForKey('usr_abc', 12);
    expect(p).to.be.within(0, 11);
    expect(partitionForKey('usr_abc', 12)).to.equal(p);
    const spread = new Set(Array.from({ length: 200 }, (_, i) => partitionForKey(`usr_${i}`, 12)));
    expect(spread.size).to.equal(12);
  });

  it('derives each message offset from its partition base offset and order in the send', () => {
    const positions = assignPositions([{ partition: 1 }, { partition: 0 }, { partition: 1 }, { partition: 1 }, { partition: 0 }], [
      { partition: 0, baseOffset: '7' },
      { partition: 1, baseOffset: '100' },
    ]);
    expect(positions).to.deep.equal([
      { partition: 1, offset: 100n },
      { partition: 0, offset: 7n },
      { partition: 1, offset: 101n },
      { partition: 1, offset: 102n },
      { partition: 0, offset: 8n },
    ]);
    expect(() => assignPositions([{ partition: 2 }], [{ partition: 0, baseOffset: '1' }])).to.throw(/partition 2/);
  });
});
