/**
 * API pods whose materializer can be held: while `gate.held`, every materializer batch
 * of a pod started here waits (heartbeating) before it is written, so nothing more
 * reaches MongoDB until the gate is released. For the read paths that must answer
 * from the tail window, or 503, while history lags.
 */
import type { Consumer, EachBatchPayload } from 'kafkajs';
import { createConsumer } from '#shared/eventlog/kafka.js';
import { atFileEnd } from '#test-support/cleanup.js';
import { sleep } from '#test-support/wait.js';
import { createDeps } from '../../src/deps.js';
import type { EventsRuntimeOverrides } from '../../src/live/runtime.js';
import { startApi, type RunningApi } from '../../src/server.js';
import { testApiConfig } from './api.js';

export interface MaterializerGate {
  held: boolean;
}

function holdingConsumer(consumer: Consumer, gate: MaterializerGate): Consumer {
  const run = consumer.run.bind(consumer);
  consumer.run = (config) =>
    run({
      ...config,
      eachBatch: async (payload: EachBatchPayload) => {
        while (gate.held && payload.isRunning() && !payload.isStale()) {
          await sleep(50);
          await payload.heartbeat().catch(() => undefined);
        }
        await config!.eachBatch!(payload);
      },
    });
  return consumer;
}

/** An API pod (closed at the run's end) whose materializer waits while `gate.held`. */
export async function startHeldApi(gate: MaterializerGate, overrides: Record<string, string>, fanout: EventsRuntimeOverrides['fanout'] = {}): Promise<RunningApi> {
  const config = testApiConfig(overrides);
  const deps = createDeps(config, { events: { fanout, materializer: { newConsumer: (kafka, groupId) => holdingConsumer(createConsumer(kafka, groupId), gate) } } });
  const api = await startApi(config, { deps });
  atFileEnd(() => api.close());
  return api;
}
