/**
 * The delivery consumer is watched: one that shows no sign of life past its
 * bound is dead, GET /readyz on the metrics port answers 503 until the
 * watchdog has replaced it, and the replacement joins the group.
 */
import { expect } from 'chai';
import { createConsumer, type Consumer } from '#shared/eventlog/kafka.js';
import { atFileEnd } from '#test-support/cleanup.js';
import { loadDeliveryConfig } from '../src/config.js';
import { startDelivery } from '../src/worker.js';
import { eventually, freePort } from '#test-support/wait.js';
import { deliveryTestEnv, waitForGroup } from './support/delivery.js';



describe('consumer liveness (delivery)', function () {
  this.timeout(60_000);

  it('GET /readyz answers 503 while the delivery consumer is hung, and the watchdog replaces it', async () => {
    const env = deliveryTestEnv('', { METRICS_PORT: String(await freePort()) });
    delete env.WEBHOOK_CA_FILE;
    let made = 0;
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const worker = await startDelivery(loadDeliveryConfig(env), {
      stallMs: 1500,
      // The first consumer stands in for a hung one: it "runs" and is never heard from again; its disconnect hangs.
      newConsumer: (kafka, groupId) => {
        made += 1;
        const real = createConsumer(kafka, groupId);
        if (made > 1) return real;
        return Object.assign(Object.create(real) as Consumer, { connect: async () => {}, subscribe: async () => {}, run: async () => {}, disconnect: () => released, on: () => () => {} });
      },
    });
    atFileEnd(() => worker.close());
    try {
      const readyz = async (): Promise<number> => {
        const res = await fetch(`${worker.metricsUrl}/readyz`);
        await res.arrayBuffer();
        return res.status;
      };
      await eventually(async () => ((await readyz()) === 503 ? true : undefined), 20_000, 100);
      expect(worker.consumer.health().alive).to.equal(false);
      release();
      await eventually(async () => ((await readyz()) === 200 ? true : undefined), 30_000, 100);
      expect(worker.consumer.replaced).to.equal(1);
      expect(made).to.equal(2);
      await waitForGroup(env); // the replacement is a working member of the group
    } finally {
      release();
      await worker.close();
    }
  });
});
