import { expect } from 'chai';
import { loadBaseConfig } from '../src/config/index.js';
import { createKafka, endOffsets, ensureTopic, partitionCount, topicCatalog } from '../src/eventlog/kafka.js';
import { createLogger } from '../src/log.js';
import { baseTestEnv, uniqueName } from './support/env.js';

describe('event topic at boot', () => {
  it('lets several processes boot at once on a fresh cluster: each ensures the topic, then reads its partition count and end offsets', async function () {
    this.timeout(90_000);
    const env = baseTestEnv({ EVENTS_TOPIC: uniqueName(`${baseTestEnv().EVENTS_TOPIC}-boot`), EVENTS_PARTITIONS: '12' });
    const config = loadBaseConfig(env, 'boot-test');
    const log = createLogger('test', 'silent');
    const spec = topicCatalog(config).events;
    // Four "processes", each with its own client, as replicas starting together would be.
    const admins = Array.from({ length: 4 }, () => createKafka(config, log).admin());
    await Promise.all(admins.map((a) => a.connect()));
    try {
      const offsets = await Promise.all(
        admins.map(async (admin) => {
          await ensureTopic(admin, spec, log);
          // The step a CI run once failed at: a process whose create lost the race read the
          // metadata before the broker knew the topic (UNKNOWN_TOPIC_OR_PARTITION).
          expect(await partitionCount(admin, spec.name)).to.equal(12);
          return endOffsets(admin, spec.name);
        }),
      );
      for (const o of offsets) {
        expect(o.size).to.equal(12);
        expect([...o.values()].every((v) => v === 0n)).to.equal(true);
      }
    } finally {
      await admins[0]!.deleteTopics({ topics: [spec.name] }).catch(() => undefined);
      await Promise.all(admins.map((a) => a.disconnect()));
    }
  });
});
