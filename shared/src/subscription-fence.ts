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

/** What a send signs for and where it goes: a change to any of it withholds a request prepared under the old state. */
export function sendingState(sub: {
  url: string;
  enabled?: boolean;
  secret_enc: string;
  secret_gen?: number;
  previous_secret_enc?: string;
  previous_secret_expires_at?: Date;
}): string {
  return JSON.stringify([sub.url, sub.enabled !== false, sub.secret_enc, sub.secret_gen ?? 0, sub.previous_secret_enc ?? null, sub.previous_secret_expires_at?.getTime() ?? null]);
}
