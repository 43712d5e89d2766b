import { expect } from 'chai';
import type { Admin } from 'kafkajs';
import { KafkaJSProtocolError } from 'kafkajs';
import { partitionCount } from './kafka.js';

/** An admin whose metadata answers come from a script: the broker's side of a topic being created. */
function scriptedAdmin(answers: (() => unknown)[]): { admin: Admin; calls: () => number } {
  let calls = 0;
  const admin = {
    fetchTopicMetadata: async () => {
      const answer = answers[Math.min(calls, answers.length - 1)]!;
      calls += 1;
      return answer();
    },
  } as unknown as Admin;
  return { admin, calls: () => calls };
}

/** kafkajs builds these from its error-code table (its typings name only a message). */
function protocolError(type: string, code: number, retriable: boolean, message: string): KafkaJSProtocolError {
  return new KafkaJSProtocolError({ type, code, retriable, message } as unknown as Error);
}

const unknownTopic = () => {
  throw protocolError('UNKNOWN_TOPIC_OR_PARTITION', 3, true, 'This server does not host this topic-partition');
};
const partitions = (leaders: number[]) => () => ({
  topics: [{ name: 't', partitions: leaders.map((leader, partitionId) => ({ partitionId, leader, partitionErrorCode: leader < 0 ? 5 : 0, replicas: [0], isr: [0] })) }],
});

describe('partition count of a topic another process is creating', () => {
  it('waits while the broker does not know the topic yet, then answers the count once every partition has a leader', async () => {
    const { admin, calls } = scriptedAdmin([unknownTopic, partitions([0, -1, 0]), partitions([0, 0, 0])]);
    expect(await partitionCount(admin, 't', 5_000)).to.equal(3);
    expect(calls()).to.equal(3);
  });

  it('gives up after its timeout with the last error', async () => {
    const { admin } = scriptedAdmin([unknownTopic]);
    const err = await partitionCount(admin, 't', 300).catch((e: unknown) => e);
    expect(err).to.be.instanceOf(KafkaJSProtocolError);
  });

  it('does not retry an error that is not retriable', async () => {
    const { admin, calls } = scriptedAdmin([
      () => {
        throw protocolError('TOPIC_AUTHORIZATION_FAILED', 29, false, 'Not authorized to access topics');
      },
    ]);
    const err = await partitionCount(admin, 't', 5_000).catch((e: unknown) => e);
    expect(err).to.be.instanceOf(KafkaJSProtocolError);
    expect(calls()).to.equal(1);
  });
});
