/**
 * `verifyWebhook(rawBody, headers, secret)`: checks a delivery's signature and
 * freshness, then returns the event it carries. Each delivery is signed two
 * ways (docs/api.md "What a delivery looks like"):
 * - Standard Webhooks: `webhook-id`, `webhook-timestamp`, `webhook-signature`
 *   (`v1,<base64>` HMAC-SHA256 of `id.timestamp.body`, keyed with the base64
 *   part of the secret after `whsec_`). The header may list several
 *   space-separated signatures (during a secret rotation it carries one per
 *   secret): any one that matches is enough.
 * - `X-Service-Signature: sha256=<hex>`: HMAC-SHA256 of the raw body keyed
 *   with the whole secret string.
 *
 * When the Standard Webhooks headers are there, they decide: the timestamp
 * must be within `toleranceSeconds` (default 300) of now, else the delivery
 * is refused as a replay, whatever X-Service-Signature says. A delivery
 * carrying only `X-Service-Signature` has no signed timestamp, so it cannot be
 * checked for replay; it is accepted only with `allowUntimestamped: true` (else
 * stripping the timestamped headers would be a way around the replay check).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { EventRecord } from './types.js';

export type HeaderBag = Headers | Record<string, string | string[] | undefined>;

export interface VerifyOptions {
  /** Largest accepted distance between `webhook-timestamp` and now, in seconds. Default 300. */
  toleranceSeconds?: number;
  /** Accept a delivery that has only `X-Service-Signature` (no replay check possible). Default false. */
  allowUntimestamped?: boolean;
  /** "Now", for tests. */
  now?: Date;
}

export type VerificationFailure = 'missing_signature' | 'bad_timestamp' | 'timestamp_too_old' | 'timestamp_in_future' | 'no_matching_signature' | 'untimestamped' | 'bad_body';

export class WebhookVerificationError extends Error {
  override name = 'WebhookVerificationError';
  constructor(
    readonly reason: VerificationFailure,
    message: string,
  ) {
    super(message);
  }
}

function header(headers: HeaderBag, name: string): string | undefined {
  if (typeof (headers as Headers).get === 'function') return (headers as Headers).get(name) ?? undefined;
  const bag = headers as Record<string, string | string[] | undefined>;
  for (const key of Object.keys(bag)) {
    if (key.toLowerCase() !== name) continue;
    const value = bag[key];
    return Array.isArray(value) ? value.join(' ') : value;
  }
  return undefined;
}

function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

function standardKey(secret: string): Buffer {
  return Buffer.from(secret.startsWith('whsec_') ? secret.slice('whsec_'.length) : secret, 'base64');
}

/** The `v1,` signature of one message under one secret (what the service sends). */
export function signStandard(secret: string, id: string, timestamp: number, body: string | Uint8Array): string {
  return 'v1,' + createHmac('sha256', standardKey(secret)).update(`${id}.${timestamp}.`).update(body).digest('base64');
}

/** The `X-Service-Signature` value of a body under one secret. */
export function signService(secret: string, body: string | Uint8Array): string {
  return 'sha256=' + createHmac('sha256', secret).update(body).digest('hex');
}

/** The headers of a delivery signed with `secret` at `now` (the CLI's `listen` forwards with these). */
export function signDelivery(secret: string, deliveryId: string, body: string, now = new Date()): Record<string, string> {
  const timestamp = Math.floor(now.getTime() / 1000);
  return {
    'X-Service-Signature': signService(secret, body),
    'webhook-id': deliveryId,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': signStandard(secret, deliveryId, timestamp, body),
  };
}

/**
 * Verifies one delivery and returns its event. `rawBody` must be the bytes as
 * received (before any JSON parsing); `secret` may be a list (a receiver
 * holding both secrets while it rotates). Throws `WebhookVerificationError`.
 */
export function verifyWebhook(rawBody: string | Uint8Array, headers: HeaderBag, secret: string | readonly string[], opts: VerifyOptions = {}): EventRecord {
  const secrets = typeof secret === 'string' ? [secret] : [...secret];
  if (secrets.length === 0 || secrets.some((s) => typeof s !== 'string' || s === '')) throw new TypeError('verifyWebhook needs a signing secret (whsec_…)');
  const body = typeof rawBody === 'string' ? Buffer.from(rawBody, 'utf8') : Buffer.from(rawBody.buffer, rawBody.byteOffset, rawBody.byteLength);
  const id = header(headers, 'webhook-id');
  const ts = header(headers, 'webhook-timestamp');
  const sigs = header(headers, 'webhook-signature');
  const service = header(headers, 'x-service-signature');

  if (sigs !== undefined || ts !== undefined) {
    if (!id || !ts || !sigs) throw new WebhookVerificationError('missing_signature', 'webhook-id, webhook-timestamp and webhook-signature must all be present');
    if (!/^\d{1,12}$/.test(ts.trim())) throw new WebhookVerificationError('bad_timestamp', 'webhook-timestamp is not a Unix time in seconds');
    const timestamp = Number(ts.trim());
    const now = Math.floor((opts.now ?? new Date()).getTime() / 1000);
    const tolerance = opts.toleranceSeconds ?? 300;
    if (now - timestamp > tolerance) throw new WebhookVerificationError('timestamp_too_old', `webhook-timestamp is ${now - timestamp} s old (tolerance ${tolerance} s)`);
    if (timestamp - now > tolerance) throw new WebhookVerificationError('timestamp_in_future', `webhook-timestamp is ${timestamp - now} s in the future (tolerance ${tolerance} s)`);
    const candidates = sigs.split(' ').filter((s) => s.startsWith('v1,'));
    const ok = secrets.some((s) => {
      const expected = signStandard(s, id, timestamp, body);
      return candidates.some((c) => safeEqual(expected, c));
    });
    if (!ok) throw new WebhookVerificationError('no_matching_signature', 'no webhook-signature matches the secret');
  } else if (service !== undefined) {
    if (!opts.allowUntimestamped) throw new WebhookVerificationError('untimestamped', 'only X-Service-Signature is present: no signed timestamp to check for replay (pass allowUntimestamped to accept it)');
    if (!secrets.some((s) => safeEqual(signService(s, body), service.trim()))) throw new WebhookVerificationError('no_matching_signature', 'X-Service-Signature does not match the secret');
  } else {
    throw new WebhookVerificationError('missing_signature', 'no webhook-signature or X-Service-Signature header');
  }
  try {
    return JSON.parse(body.toString('utf8')) as EventRecord;
  } catch {
    throw new WebhookVerificationError('bad_body', 'the signed body is not JSON');
  }
}
