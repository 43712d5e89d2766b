/**
 * When to try a failed delivery again. A non-2xx answer or a network failure
 * is retried on the schedule, except the permanent failures below, which no
 * retry within the schedule's day and more could cure; after the last step of
 * the schedule the delivery is given up (state `failed`, counted by
 * webhook_deliveries_given_up_total, queued again by POST …/recover).
 */
import type { AttemptOutcome } from '#shared/mongo/index.js';

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;

/**
 * 5 s, 5 m, 30 m, 2 h, 5 h, 10 h, 14 h: eight attempts over about 31.6 hours
 * (Svix's steps, the last one lengthened). Even with every delay jittered 20 %
 * short, the last attempt comes more than 24 hours after the first, so a
 * receiver that is down overnight loses nothing.
 */
export const DEFAULT_SCHEDULE: number[] = [5_000, 5 * MINUTE, 30 * MINUTE, 2 * HOUR, 5 * HOUR, 10 * HOUR, 14 * HOUR];

/** A Retry-After answer may push the next attempt out, but never beyond this. */
const MAX_RETRY_AFTER_MS = HOUR;

/** ±20 %: receivers recovering from an outage are not hit by every delivery at the same instant. */
export const JITTER = 0.2;

/** Parses "1s,1s,2s" or "500ms, 2m, 1h" into milliseconds. */
export function parseSchedule(text: string): number[] {
  const steps = text.split(',').map((part) => part.trim());
  if (steps.length === 0 || steps.length > 50) throw new Error('must list 1 to 50 durations');
  return steps.map((step) => {
    const m = /^(\d{1,7})(ms|s|m|h)$/.exec(step);
    if (!m) throw new Error(`has a bad duration "${step}" (want e.g. 500ms, 5s, 2m, 1h)`);
    const ms = Number(m[1]) * (UNITS[m[2] as string] as number);
    if (ms < 100 || ms > 24 * HOUR) throw new Error(`duration "${step}" must be between 100ms and 24h`);
    return ms;
  });
}

/** Seconds or an HTTP date; null when absent or unreadable. */
export function parseRetryAfter(value: string | undefined, now: Date): number | null {
  if (!value) return null;
  const text = value.trim();
  if (/^\d{1,10}$/.test(text)) return Number(text) * 1000;
  const at = Date.parse(text);
  if (Number.isNaN(at)) return null;
  return Math.max(0, at - now.getTime());
}

/**
 * Certificate verdicts that say "this is not the host you meant" or "nobody
 * we trust vouches for it": a name mismatch, a self-signed or unknown-issuer
 * chain. An expired certificate, a handshake cut short or a protocol error is
 * retried: the receiver may renew or recover within the schedule.
 */
const PERMANENT_TLS = /ERR_TLS_CERT_ALTNAME_INVALID|HOSTNAME_MISMATCH|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT|altnames|does not match certificate/i;

/**
 * Failures that are not retried (the delivery is failed after this attempt):
 * - `blocked_address`: the URL or what its name resolves to is an address we never send to;
 * - `tls` with a certificate for another name, or one no trusted CA signed;
 * - HTTP 410 Gone: the receiver says the endpoint is gone for good.
 * Everything else (timeouts, refused connections, DNS failures, 3xx, other 4xx, 5xx) is retried.
 */
export function isPermanentFailure(result: { outcome: AttemptOutcome; status: number | null; error: string | null }): boolean {
  if (result.outcome === 'blocked_address') return true;
  if (result.status === 410) return true;
  return result.outcome === 'tls' && result.error !== null && PERMANENT_TLS.test(result.error);
}

/** Why a delivery was given up: its schedule ran out, a failure no retry could cure, or its subscription was disabled. */
export type GiveUpReason = 'exhausted' | 'permanent' | 'subscription_disabled';

/** Why the delivery of a failed attempt with no next attempt was given up. */
export function giveUpReason(result: { outcome: AttemptOutcome; status: number | null; error: string | null }): GiveUpReason {
  return isPermanentFailure(result) ? 'permanent' : 'exhausted';
}

interface AttemptResult {
  status: number | null;
  retryAfterMs: number | null;
}

/**
 * Delay before the next attempt after attempt number `attempt` (1-based)
 * failed, or null when the schedule is exhausted.
 */
export function nextDelay(attempt: number, schedule: number[], result: AttemptResult, random: () => number = Math.random): number | null {
  const step = schedule[attempt - 1];
  if (step === undefined) return null;
  const jittered = Math.round(step * (1 - JITTER + 2 * JITTER * random()));
  if ((result.status === 429 || result.status === 503) && result.retryAfterMs !== null) {
    // Honour the receiver's wish, but no sooner than our own schedule and no later than an hour.
    return Math.max(jittered, Math.min(result.retryAfterMs, MAX_RETRY_AFTER_MS));
  }
  return jittered;
}
