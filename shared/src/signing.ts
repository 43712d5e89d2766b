/**
 * Webhook signatures. Each delivery carries two independent signatures over
 * the same raw body:
 * - `X-Service-Signature: sha256=<hex>`: HMAC-SHA256 of the raw body keyed
 *   with the secret string exactly as shown to the user (`whsec_` included).
 * - Standard Webhooks (`webhook-id`, `webhook-timestamp`, `webhook-signature:
 *   v1,<base64>`): HMAC-SHA256 of `${id}.${timestamp}.${body}` keyed with the
 *   base64-decoded part after `whsec_`, so receivers can refuse replays and
 *   use the ecosystem's verifier libraries.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

const SECRET_PREFIX = 'whsec_';

/** `whsec_` + base64 of 32 random bytes. */
export function newWebhookSecret(): string {
  return SECRET_PREFIX + randomBytes(32).toString('base64');
}

function standardKey(secret: string): Buffer {
  return Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64');
}

function serviceSignature(secret: string, body: string | Buffer): string {
  return 'sha256=' + createHmac('sha256', secret).update(body).digest('hex');
}

export function standardSignature(secret: string, id: string, timestamp: number, body: string | Buffer): string {
  const mac = createHmac('sha256', standardKey(secret));
  mac.update(`${id}.${timestamp}.`);
  mac.update(body);
  return 'v1,' + mac.digest('base64');
}

interface SignedHeaders {
  'X-Service-Signature': string;
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
}

/**
 * The signature headers of one attempt; the timestamp is the attempt's send
 * time. `secrets`: the current secret first, then, during a rotation's grace
 * period, the previous one. `webhook-signature` carries one `v1,` value per
 * secret, space-separated (Standard Webhooks lets a receiver accept any of
 * them); `X-Service-Signature` has room for one and uses the current secret.
 */
export function signDelivery(secrets: string | readonly string[], deliveryId: string, body: string, now: Date): SignedHeaders {
  const all = typeof secrets === 'string' ? [secrets] : secrets;
  const current = all[0];
  if (current === undefined) throw new Error('signDelivery needs at least one secret');
  const timestamp = Math.floor(now.getTime() / 1000);
  return {
    'X-Service-Signature': serviceSignature(current, body),
    'webhook-id': deliveryId,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': all.map((secret) => standardSignature(secret, deliveryId, timestamp, body)).join(' '),
  };
}

function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** Receiver side: checks `X-Service-Signature` over the raw body in constant time. */
export function verifyServiceSignature(secret: string, rawBody: string | Buffer, header: string | undefined): boolean {
  if (typeof header !== 'string') return false;
  return safeEqual(serviceSignature(secret, rawBody), header.trim());
}

interface StandardHeaders {
  'webhook-id'?: string;
  'webhook-timestamp'?: string;
  'webhook-signature'?: string;
}

/**
 * Receiver side, per the Standard Webhooks spec: the timestamp must be within
 * `toleranceSeconds` of now (replay window) and one of the space-separated
 * `v1,` signatures must match.
 */
export function verifyStandardWebhook(
  secret: string,
  rawBody: string | Buffer,
  headers: StandardHeaders,
  opts: { toleranceSeconds?: number; now?: Date } = {},
): boolean {
  const id = headers['webhook-id'];
  const ts = headers['webhook-timestamp'];
  const sigs = headers['webhook-signature'];
  if (!id || !ts || !sigs || !/^\d{1,12}$/.test(ts)) return false;
  const now = Math.floor((opts.now ?? new Date()).getTime() / 1000);
  if (Math.abs(now - Number(ts)) > (opts.toleranceSeconds ?? 300)) return false;
  const expected = standardSignature(secret, id, Number(ts), rawBody);
  return sigs.split(' ').some((candidate) => safeEqual(expected, candidate));
}
