/**
 * Every consumer of the API process is watched: the fan-out's and the
 * materializer's. A consumer that shows no sign of life past its bound is
 * dead: /readyz answers 503 until the watchdog has replaced it, and the
 * replacement works (events reach this process's long-polls again).
 */
import { expect } from 'chai';
import { createConsumer, type Consumer, type Kafka } from '#shared/eventlog/kafka.js';
import { atFileEnd } from '#test-support/cleanup.js';
import { createDeps } from '../src/deps.js';
import { startApi, type RunningApi } from '../src/server.js';
import { createAccount } from './support/accounts.js';
import { call, sharedApis, testApiConfig } from './support/api.js';
import { eventually, ingest } from './support/events.js';

/**
 * Makes consumers; the first stands in for a hung one (it "connects" and
 * "runs" and is never heard from again; its disconnect hangs until `release`).
 */
function hungFirst(): { make: (kafka: Kafka, groupId: string) => Consumer; made: () => number; release: () => void } {
  let made = 0;
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  return {
    made: () => made,
    release,
    make: (kafka, groupId) => {
      made += 1;
      const real = createConsumer(kafka, groupId);
      if (made > 1) return real;
      const stub = { connect: async () => {}, subscribe: async () => {}, run: async () => {}, disconnect: () => released, on: () => () => {}, seek: () => {} };
      return Object.assign(Object.create(real) as Consumer, stub);
    },
  };
}

async function readyz(api: RunningApi): Promise<{ status: number; body: any }> {
  const res = await call(api.url, 'GET', '/readyz');
  return { status: res.status, body: res.body };
}

describe('consumer liveness (API)', function () {
  this.timeout(60_000);

  for (const which of ['fanout', 'materializer'] as const) {
    it(`/readyz answers 503 while the ${which} consumer is hung, and the watchdog replaces it`, async () => {
      const stand = hungFirst();
      const config = testApiConfig({ INSTANCE_ID: `test-liveness-${which}` });
      const deps = createDeps(config, { events: { [which]: { stallMs: 1500, newConsumer: stand.make } } });
      const api = await startApi(config, { deps });
      atFileEnd(() => api.close());
      try {
        const consumer = which === 'fanout' ? api.deps.events.fanout : api.deps.events.materializer;
        const dead = await eventually(async () => {
          const r = await readyz(api);
          return r.status === 503 ? r : undefined;
        }, 20_000);
        expect(JSON.stringify(dead.body.error.details)).to.include(which === 'fanout' ? 'fan-out' : 'materializer');
        expect(consumer.health().alive).to.equal(false);
        stand.release(); // the hung consumer's disconnect returns: the replacement starts
        await eventually(async () => ((await readyz(api)).status === 200 ? true : undefined), 30_000);
        expect(consumer.replaced).to.equal(1);
        expect(stand.made()).to.equal(2);
        if (which === 'fanout') {
          // The replacement dispatches: a long-poll on this process gets an event ingested elsewhere.
          const [a] = await sharedApis();
          const acct = await createAccount(a.url);
          const pending = call(api.url, 'POST', '/api/v1/events/wait', { headers: { 'x-api-key': acct.apiKey }, body: { timeout_ms: 20_000 } });
          await eventually(async () => (api.deps.events.registry.size > 0 ? true : undefined));
          const [sent] = await ingest(a, [{ account_id: acct.userId, type: 'call.started' }]);
          expect((await pending).body.event?.id).to.equal(sent!.id);
        }
      } finally {
        stand.release();
        await api.close();
      }
    });
  }
});
