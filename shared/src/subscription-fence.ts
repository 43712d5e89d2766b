/**
 * The fence that makes "nothing is sent to a subscription once its DELETE
 * returned" (and the same for a PATCH or a secret rotation: nothing starts
 * under the old state) true however long a send takes to get going.
 *
 * A delivery process reads the subscription before sending, but DNS,
 * connect and the TLS handshake come between that read and the request's
 * first byte. So the request is written only under a read that started at
 * most SEND_READ_MAX_AGE_MS before (re-read, and compared, when older), and
 * the API returns from a change no sooner than SUBSCRIPTION_FENCE_MS after
 * the change was stored. A request written after the API returned then used
 * a read that started after the change was stored, and saw it. The gap
 * between the two bounds covers the receiver's own delay in noting when a
 * request arrived and clocks that run at slightly different rates.
 *
 * The read bound is set well above what an `_id` read of one document takes
 * even on a busy store (a few ms, tens under load): a read slower than it is
 * tried again until one is fresh enough, and only a store slower than that
 * for the whole 4 s of an attempt turns a send into a timeout (retried on the
 * schedule). A management call waiting a second is the price.
 */
export const SUBSCRIPTION_FENCE_MS = 1000;
export const SEND_READ_MAX_AGE_MS = 750;

/**
 * Activation, so that a delivery process may match events against a table of
 * subscriptions loaded a little earlier (delivery/src/subscription-table.ts)
 * and never miss a new one.
 *
 * A create stores `created_at = now + SUBSCRIPTION_FENCE_MS` (now: before the
 * insert) and returns only once that time has come; a re-enable stores
 * `enabled_at` the same way. Should the write itself take longer than half
 * the fence, the time is pushed to (now after the write) + fence with one
 * more update before waiting. So a subscription active for an event
 * (created_at, enabled_at <= the event's created_at) was stored at least
 * SUBSCRIPTION_FENCE_MS / 2 before the event's created_at, and any load of
 * the table that started at or after `event.created_at - ACTIVATION_SLACK_MS`
 * contains it. The slack stays below half the fence by 100 ms: room for the
 * clocks of the API and the delivery hosts to differ by that much. A load
 * older than that (slow store, failed loads) is not used for the event: the
 * batch's subscriptions are queried instead.
 *
 * An event published after the create returned has created_at >= the
 * subscription's created_at, so it is delivered; one that occurred before is not.
 */
export const ACTIVATION_SLACK_MS = 400;

/** Waits until the wall clock reaches `at` (an activation time stored as created_at or enabled_at). */
export async function waitUntilTime(at: Date, now: () => number = Date.now): Promise<void> {
  for (let left = at.getTime() - now(); left > 0; left = at.getTime() - now()) await new Promise((r) => setTimeout(r, left));
}

/**
 * What a send signs for, where it goes, the custom headers it carries and
 * since when the subscription takes events (a disable and re-enable while a
 * send was connecting moves `enabled_at`): a change to any of it withholds a
 * request prepared under the old state.
 */
export function sendingState(sub: {
  url: string;
  enabled?: boolean;
  enabled_at?: Date;
  secret_enc: string;
  secret_gen?: number;
  previous_secret_enc?: string;
  previous_secret_expires_at?: Date;
  headers_enc?: string;
}): string {
  return JSON.stringify([
    sub.url,
    sub.enabled !== false,
    sub.enabled_at?.getTime() ?? null,
    sub.secret_enc,
    sub.secret_gen ?? 0,
    sub.previous_secret_enc ?? null,
    sub.previous_secret_expires_at?.getTime() ?? null,
    sub.headers_enc ?? null,
  ]);
}
