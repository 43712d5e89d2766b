import { atRunEnd } from '#test-support/cleanup.js';
import { baseTestEnv } from '#test-support/env.js';
import { FakeDns } from '#test-support/fake-dns.js';
import { createDeps } from '../../src/deps.js';
import { startApi, type RunningApi } from '../../src/server.js';
import { checkResponses, testApiConfig } from './api.js';

export const WEBHOOK_CAP_FOR_TESTS = 5;

/**
 * The webhook tests' own topic and database. Every API process on a topic
 * joins that topic's materializer group, so API processes of other tests
 * (other databases, or no reachable database at all) would otherwise own
 * some partitions and take those events away from this test's database.
 */
export function webhookTestEnv(): { EVENTS_TOPIC: string; MONGO_DB: string; DELIVERY_GROUP_ID: string } {
  const base = baseTestEnv();
  const topic = `${base.EVENTS_TOPIC}-webhooks`;
  const db = `${base.MONGO_DB}_webhooks`;
  // Every delivery process of these tests in ONE group, as in a deployment (the default group is
  // per topic and database): two groups on one topic each deliver every event (the log is the
  // queue: nothing in the store stops a second group).
  return { EVENTS_TOPIC: topic, MONGO_DB: db, DELIVERY_GROUP_ID: `${topic}.delivery.${db}` };
}

let started: Promise<{ api: RunningApi; dns: FakeDns }> | null = null;

/**
 * An API process as a developer runs it to reach a local receiver: private
 * targets allowed (WEBHOOK_ALLOW_PRIVATE_TARGETS), a low per-account cap, and
 * a fake DNS the test controls; on the webhook tests' own topic and database
 * (a delivery process for end-to-end tests uses the same).
 */
export function webhookApi(): Promise<{ api: RunningApi; dns: FakeDns }> {
  started ??= (async () => {
    const config = testApiConfig({
      ...webhookTestEnv(),
      INSTANCE_ID: 'test-webhooks',
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
      WEBHOOK_MAX_PER_ACCOUNT: String(WEBHOOK_CAP_FOR_TESTS),
    });
    const dns = new FakeDns();
    const deps = { ...createDeps(config), resolveHost: dns.resolve };
    const api = await startApi(config, { deps });
    // Shared by the webhook test files of a run (started once): closed when the run ends.
    atRunEnd(() => api.close());
    checkResponses(api);
    return { api, dns };
  })();
  return started;
}
