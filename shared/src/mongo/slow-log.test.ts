import { expect } from 'chai';
import { filterShape } from './slow-log.js';

describe('slow MongoDB command log', () => {
  it('shows a filter by its field names and operators, never its values', () => {
    const shape = filterShape({ _id: 'svc_secret', account_id: 'usr_1', offset: { $gt: 5, $lte: 9 }, $or: [{ expire: { $gt: new Date() } }, { expire: null }] });
    expect(shape).to.deep.equal({ _id: '?', account_id: '?', offset: { $gt: '?', $lte: '?' }, $or: [{ expire: { $gt: '?' } }] });
    expect(JSON.stringify(shape)).to.not.include('secret');
  });
});
