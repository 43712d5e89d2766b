import { expect } from 'chai';
import type { IndexDescription } from 'mongodb';
import { commandShapes, describeShape, servingIndex, type QueryShape } from './query-shapes.js';

function find(filter: Record<string, unknown>, sort?: Record<string, unknown>): QueryShape {
  const shapes = commandShapes('find', { find: 'c', filter, ...(sort ? { sort } : {}) });
  expect(shapes).to.have.length(1);
  return shapes[0]!;
}

const served = (shape: QueryShape, indexes: IndexDescription[]): string | null => servingIndex(shape, indexes);

describe('query shapes: what a command sends', () => {
  it('splits a filter into equality fields, range fields and the sort', () => {
    const shape = find({ account_id: 'a', type: { $in: ['x', 'y'] }, offset: { $gte: 1, $lt: 9 }, state: { $eq: 'p' }, meta: { k: 1 } }, { offset: 1, _id: -1 });
    expect(shape).to.deep.equal({ collection: 'c', equality: ['account_id', 'meta', 'state', 'type'], range: ['offset'], sort: [['offset', 1], ['_id', -1]] });
    expect(describeShape(shape)).to.equal('c {eq: account_id,meta,state,type; range: offset; sort: offset:1,_id:-1}');
  });

  it('treats $ne, $nin, $exists and $regex as range bounds, and $expr, $size, $nor as no bound', () => {
    const shape = find({ a: { $ne: 1 }, b: { $nin: [1] }, c: { $exists: true }, d: { $regex: '^x', $options: 'i' }, e: { $size: 2 }, $expr: { $gt: ['$f', 1] }, $nor: [{ g: 1 }] });
    expect(shape.equality).to.deep.equal([]);
    expect(shape.range).to.deep.equal(['a', 'b', 'c', 'd']);
  });

  it('gives one shape per $or branch, each with the fields outside the $or; $and is flattened', () => {
    const shapes = commandShapes('find', { find: 'c', filter: { a: 1, $or: [{ b: 1 }, { c: { $gt: 1 } }], $and: [{ d: 1 }] } });
    expect(shapes.map(describeShape)).to.deep.equal(['c {eq: a,b,d; range: -; sort: -}', 'c {eq: a,d; range: c; sort: -}']);
  });

  it('reads the filter of every kind of command that has one, and none from an insert', () => {
    expect(commandShapes('update', { update: 'c', updates: [{ q: { _id: 1, lease: 2 } }, { q: { x: 1 } }] }).map(describeShape)).to.deep.equal(['c {eq: _id,lease; range: -; sort: -}', 'c {eq: x; range: -; sort: -}']);
    expect(commandShapes('delete', { delete: 'c', deletes: [{ q: { at: { $lt: 1 } }, limit: 0 }] }).map(describeShape)).to.deep.equal(['c {eq: -; range: at; sort: -}']);
    expect(commandShapes('findAndModify', { findAndModify: 'c', query: { a: 1 }, sort: { b: -1 } }).map(describeShape)).to.deep.equal(['c {eq: a; range: -; sort: b:-1}']);
    expect(commandShapes('count', { count: 'c', query: { a: 1 } }).map(describeShape)).to.deep.equal(['c {eq: a; range: -; sort: -}']);
    expect(commandShapes('aggregate', { aggregate: 'c', pipeline: [{ $match: { a: 1 } }, { $match: { b: { $gt: 1 } } }, { $sort: { b: 1 } }, { $group: { _id: null } }] }).map(describeShape)).to.deep.equal(['c {eq: a; range: b; sort: b:1}']);
    expect(commandShapes('find', { find: 'c', filter: { a: 1 }, sort: new Map([['b', -1], ['_id', -1]]) }).map(describeShape), 'the driver sends a sort as a Map').to.deep.equal(['c {eq: a; range: -; sort: b:-1,_id:-1}']);
    expect(commandShapes('insert', { insert: 'c', documents: [{ a: 1 }] })).to.deep.equal([]);
    expect(commandShapes('getMore', { getMore: 1, collection: 'c' })).to.deep.equal([]);
  });
});

describe('query shapes: the prefix rule', () => {
  const events: IndexDescription[] = [
    { key: { account_id: 1, partition: 1, offset: 1 }, name: 'account_position' },
    { key: { partition: 1, offset: 1 }, name: 'position' },
  ];

  it('serves a filter fixing _id from the _id index, whatever else it names', () => {
    expect(served(find({ _id: 'x', lease_id: 'y' }), [])).to.equal('_id_');
    expect(served(find({ _id: { $in: ['x'] } }, { at: 1 }), [])).to.equal('_id_');
    expect(served(find({ _id: { $gt: 'x' } }, { _id: 1 }), [])).to.equal('_id_');
  });

  it('equality fields first in any order, then the sort, then a range', () => {
    const idx: IndexDescription[] = [{ key: { a: 1, b: 1, c: -1, d: 1 }, name: 'abcd' }];
    expect(served(find({ b: 1, a: 2 }), idx)).to.equal('abcd');
    expect(served(find({ b: 1, a: 2 }, { c: -1, d: 1 }), idx)).to.equal('abcd');
    expect(served(find({ b: 1, a: 2 }, { c: 1, d: -1 }), idx), 'the exact reverse').to.equal('abcd');
    expect(served(find({ b: 1, a: 2, c: { $gt: 1 } }, { c: -1 }), idx)).to.equal('abcd');
    expect(served(find({ a: 2, c: 1 }, { b: 1, d: 1 }), idx), 'an equality field between sort fields is constant').to.equal('abcd');
    expect(served(find({ a: 2 }), idx)).to.equal('abcd');
    expect(served(find({ a: { $gte: 2 } }), idx), 'a range on the first key').to.equal('abcd');
  });

  it('is not served when the index does not lead with the filter', () => {
    expect(served(find({ partition: 1, offset: { $gte: 0 } }, { partition: 1, offset: 1 }), [events[0]!])).to.equal(null);
    expect(served(find({ partition: 1, offset: { $gte: 0 } }, { partition: 1, offset: 1 }), events)).to.equal('position');
    expect(served(find({ b: 1 }), [{ key: { a: 1, b: 1 }, name: 'ab' }])).to.equal(null);
    expect(served(find({ event_id: 'e' }), [{ key: { delivery_id: 1, at: 1 }, name: 'delivery' }])).to.equal(null);
  });

  it('is not served when the sort needs an in-memory sort', () => {
    const recent: IndexDescription[] = [{ key: { subscription_id: 1, at: -1 }, name: 'recent' }];
    expect(served(find({ subscription_id: 's' }, { at: -1 }), recent)).to.equal('recent');
    expect(served(find({ subscription_id: 's' }, { at: 1 }), recent)).to.equal('recent');
    expect(served(find({ subscription_id: 's' }, { at: -1, _id: -1 }), recent), 'a tie-breaker the index lacks').to.equal(null);
    expect(served(find({ subscription_id: 's' }, { at: -1, _id: -1 }), [{ key: { subscription_id: 1, at: -1, _id: -1 }, name: 'r' }])).to.equal('r');
    expect(served(find({ subscription_id: 's' }, { at: -1, _id: 1 }), [{ key: { subscription_id: 1, at: -1, _id: -1 }, name: 'r' }]), 'mixed directions are not a reverse').to.equal(null);
    expect(served(find({ a: 1, b: { $gt: 1 } }, { c: 1 }), [{ key: { a: 1, b: 1, c: 1 }, name: 'abc' }]), 'a range before the sort').to.equal(null);
  });

  it('serves an unfiltered query only by the order of an index; a bare scan never', () => {
    expect(served(find({}, { at: 1 }), [{ key: { at: 1 }, name: 'at' }])).to.equal('at');
    expect(served(find({}), [{ key: { at: 1 }, name: 'at' }])).to.equal(null);
    expect(served(find({ x: 1 }, { at: 1 }), [{ key: { at: 1 }, name: 'at' }]), 'the whole index read in order, filtering x').to.equal(null);
  });

  it('names the index whose leading keys bound the most', () => {
    const idx: IndexDescription[] = [
      { key: { a: 1 }, name: 'a' },
      { key: { a: 1, b: 1 }, name: 'ab' },
    ];
    expect(served(find({ a: 1, b: 2 }), idx)).to.equal('ab');
    expect(served(find({ a: 1, b: 2, _id: { $gt: 'x' } }), idx), 'rather than an _id range').to.equal('ab');
  });

  it('$in counts as equality, also before a sort', () => {
    expect(served(find({ account_id: { $in: ['a', 'b'] }, partition: 1 }, { offset: 1 }), events)).to.equal('account_position');
  });

  it('serves each $or branch on its own, and fails if one branch has no index', () => {
    const idx: IndexDescription[] = [
      { key: { a: 1 }, name: 'a' },
      { key: { b: 1 }, name: 'b' },
    ];
    const shapes = commandShapes('find', { find: 'c', filter: { $or: [{ a: 1 }, { b: 1 }, { c: 1 }] } });
    expect(shapes.map((s) => served(s, idx))).to.deep.equal(['a', 'b', null]);
  });

  it('uses a partial index only when the filter implies its filter', () => {
    const idx: IndexDescription[] = [{ key: { account_id: 1, slot: 1 }, name: 'slot', partialFilterExpression: { slot: { $exists: true } } }];
    expect(served(find({ account_id: 'a', slot: 3 }), idx)).to.equal('slot');
    expect(served(find({ account_id: 'a' }), idx)).to.equal(null);
  });
});
