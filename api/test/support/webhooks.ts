import { atRunEnd } from '../../../shared/test/support/cleanup.js';
import { FakeDns } from '../../../shared/test/support/fake-dns.js';
import { createDeps } from '../../src/deps.js';
import { startApi, type RunningApi } from '../../src/server.js';
import { testApiConfig } from './api.js';

export const WEBHOOK_CAP_FOR_TESTS = 5;

let started: Promise<{ api: RunningApi; dns: FakeDns }> | null = null;

/**
 * An API process as a developer runs it to reach a local receiver: private
 * targets allowed (WEBHOOK_ALLOW_PRIVATE_TARGETS), a low per-account cap, and
 * a fake DNS the test controls. Shares the run's topic and database, so the
 * other API processes and the delivery process see its subscriptions.
 */
export function webhookApi(): Promise<{ api: RunningApi; dns: FakeDns }> {
  started ??= (async () => {
    const config = testApiConfig({
      INSTANCE_ID: 'test-webhooks',
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
      WEBHOOK_MAX_PER_ACCOUNT: String(WEBHOOK_CAP_FOR_TESTS),
    });
    const dns = new FakeDns();
    const deps = { ...createDeps(config), resolveHost: dns.resolve };
    const api = await startApi(config, { deps });
    atRunEnd(() => api.close());
    return { api, dns };
  })();
  return started;
}
