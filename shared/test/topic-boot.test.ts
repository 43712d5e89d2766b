import { expect } from 'chai';
import { loadBaseConfig } from '../src/config/index.js';
import { createKafka, endOffsets, ensureTopic, partitionCount, topicCatalog, topicConfig } from '../src/eventlog/kafka.js';
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

  it('creates the topic with EVENTS_REPLICATION_FACTOR and EVENTS_MIN_INSYNC_REPLICAS (the dev broker is one node: 2 copies are refused)', async function () {
    this.timeout(60_000);
    const log = createLogger('test', 'silent');
    const name = uniqueName(`${baseTestEnv().EVENTS_TOPIC}-rf`);
    const config = loadBaseConfig(baseTestEnv({ EVENTS_TOPIC: name, EVENTS_PARTITIONS: '2', EVENTS_REPLICATION_FACTOR: '1', EVENTS_MIN_INSYNC_REPLICAS: '1' }), 'rf-test');
    const admin = createKafka(config, log).admin();
    await admin.connect();
    try {
      await ensureTopic(admin, topicCatalog(config).events, log);
      // The broker's own setting is 1 as well: what shows the setting was passed is that the
      // topic holds it as its own (source TOPIC_CONFIG), not inherited from the broker.
      const described = await admin.describeConfigs({ includeSynonyms: false, resources: [{ type: 2, name, configNames: ['min.insync.replicas'] }] });
      const entry = described.resources[0]?.configEntries[0] as { configValue?: string; configSource?: number } | undefined;
      expect({ value: entry?.configValue, source: entry?.configSource }).to.deep.equal({ value: '1', source: 1 });
      expect(await topicConfig(admin, name, 'min.insync.replicas')).to.equal('1');
      const meta = await admin.fetchTopicMetadata({ topics: [name] });
      expect(meta.topics[0]?.partitions.map((p) => p.replicas.length)).to.deep.equal([1, 1]);

      const tooMany = loadBaseConfig(baseTestEnv({ EVENTS_TOPIC: `${name}-2`, EVENTS_REPLICATION_FACTOR: '2' }), 'rf-test');
      let refused: { errors?: { type?: string }[] } | null = null;
      await ensureTopic(admin, topicCatalog(tooMany).events, log).catch((err: { errors?: { type?: string }[] }) => (refused = err));
      expect((refused as { errors?: { type?: string }[] } | null)?.errors?.map((e) => e.type)).to.deep.equal(['INVALID_REPLICATION_FACTOR']);
    } finally {
      await admin.deleteTopics({ topics: [name] }).catch(() => undefined);
      await admin.disconnect();
    }
  });
});
