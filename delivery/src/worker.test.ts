import { expect } from 'chai';
import type { Admin } from 'kafkajs';
import { pino } from 'pino';
import { placeNewGroup } from './worker.js';

/** A stand-in admin: a group that never committed, and a topic whose leaders answer offset requests only from the third ask. */
function freshTopicAdmin(): { admin: Admin; set: unknown[]; asks: () => number } {
  let asks = 0;
  const set: unknown[] = [];
  const admin = {
    fetchOffsets: async () => [{ topic: 't', partitions: [{ partition: 0, offset: '-1' }, { partition: 1, offset: '-1' }] }],
    fetchTopicOffsets: async () => {
      asks += 1;
      if (asks < 3) throw Object.assign(new Error('This server is not the leader for that topic-partition'), { retriable: true, type: 'NOT_LEADER_FOR_PARTITION' });
      return [
        { partition: 0, offset: '7', high: '7', low: '0' },
        { partition: 1, offset: '3', high: '3', low: '0' },
      ];
    },
    setOffsets: async (args: unknown) => {
      set.push(args);
    },
  } as unknown as Admin;
  return { admin, set, asks: () => asks };
}

describe('placing a new delivery group at the end of the log', () => {
  it('waits out a just-created topic whose leaders do not answer offset requests yet, then sets every partition to its end', async () => {
    const { admin, set, asks } = freshTopicAdmin();
    await placeNewGroup(admin, 'g', 't', 'latest', pino({ level: 'silent' }));
    expect(asks()).to.equal(3);
    expect(set).to.deep.equal([{ groupId: 'g', topic: 't', partitions: [{ partition: 0, offset: '7' }, { partition: 1, offset: '3' }] }]);
  });
});
