/**
 * Subscriptions the hostile tests create point at public addresses (no DNS
 * needed to create them). A delivery process started later in the same run
 * reads the run's topic from the beginning and would try to deliver every
 * event of these accounts there, so each hostile file removes the
 * subscriptions of the accounts it used before it ends.
 */
import type { RunningApi } from '../../../src/server.js';

const owners = new Set<string>();

/** Marks an account whose subscriptions must not outlive its test file. */
export function ownsWebhooks(accountId: string): void {
  owners.add(accountId);
}

/** Deletes the subscriptions (and any pending deliveries) of every marked account. */
export async function dropHostileWebhooks(api: RunningApi): Promise<void> {
  if (owners.size === 0) return;
  const { webhooks, deliveries } = api.deps.mongo.collections;
  const accounts = [...owners];
  const ids = (await webhooks.find({ account_id: { $in: accounts } }, { projection: { _id: 1 } }).toArray()).map((d) => d._id);
  await webhooks.deleteMany({ account_id: { $in: accounts } });
  if (ids.length > 0) await deliveries.deleteMany({ subscription_id: { $in: ids } });
}
