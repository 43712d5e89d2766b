import { expect } from 'chai';
import { Kafka, logLevel } from 'kafkajs';
import { baseTestEnv, uniqueName } from '#test-support/env.js';
import { loadDeliveryConfig } from '../src/config.js';
import { startDelivery } from '../src/worker.js';

describe('delivery process', () => {
  it('joins its consumer group and leaves it cleanly on shutdown', async function () {
    this.timeout(60_000);
    const groupId = uniqueName('delivery-boot');
    const env = baseTestEnv({ DELIVERY_GROUP_ID: groupId });
    const worker = await startDelivery(loadDeliveryConfig(env));
    const admin = new Kafka({ brokers: env.KAFKA_BROKERS!.split(','), logLevel: logLevel.NOTHING }).admin();
    await admin.connect();
    try {
      let state = '';
      for (let i = 0; i < 100 && state !== 'Stable'; i++) {
        const { groups } = await admin.describeGroups([groupId]);
        state = groups[0]?.state ?? '';
        if (state !== 'Stable') await new Promise((r) => setTimeout(r, 200));
      }
      expect(state).to.equal('Stable');
      await worker.close();
      const { groups } = await admin.describeGroups([groupId]);
      expect(groups[0]?.members).to.have.length(0);
    } finally {
      await worker.close();
      await admin.disconnect();
    }
  });
});
