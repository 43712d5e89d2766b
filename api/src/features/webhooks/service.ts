/**
 * Webhook subscriptions: transport-free service functions used by the HTTP
 * routes and the MCP tools. Every function takes the caller's account id; a
 * subscription of another account is "not found", never "forbidden".
 */
import { randomBytes } from 'node:crypto';
import { AppError, notFound, unavailable, validationFailed } from '#shared/errors/index.js';
import { buildEnvelope } from '#shared/eventlog/envelope.js';
import type { AttemptDoc, DeliveryTrigger, DisabledReason, SubscriptionOrdering, WebhookDoc, WebhookStatusDoc } from '#shared/mongo/index.js';
import { newWebhookSecret } from '#shared/signing.js';
import { SUBSCRIPTION_FENCE_MS, waitUntilTime } from '#shared/subscription-fence.js';
import { LOOKUP_LIMIT } from '#shared/dns.js';
import { checkWebhookUrl, parseWebhookUrl, type Verdict } from '#shared/url-safety.js';
import { checkHeaders, headersAad, maskHeaders } from '#shared/webhook-headers.js';
import type { ApiDeps } from '../../deps.js';
import { DEFAULT_ATTEMPTS_LIMIT, WEBHOOK_ID, type CreateWebhookInput, type RotateSecretInput, type UpdateWebhookInput } from './schemas.js';

export type WebhookDeps = Pick<ApiDeps, 'config' | 'mongo' | 'clock' | 'resolveHost' | 'secretBox' | 'events' | 'metrics' | 'log'>;

/** The subscription as the API shows it (never the secret, except where stated). */
interface Webhook {
  id: string;
  url: string;
  events: string[];
  description: string;
  enabled: boolean;
  disabled_reason: DisabledReason | null;
  disabled_at: string | null;
  rate_limit: number | null;
  ordering: SubscriptionOrdering;
  headers: Record<string, '****'>;
  created_at: string;
  last_status: number | null;
  last_delivery_at: string | null;
  last_error: string | null;
}

export interface Attempt {
  id: string;
  delivery_id: string;
  event_id: string;
  event_type: string;
  attempt: number;
  status: number | null;
  outcome: string;
  error: string | null;
  duration_ms: number;
  at: string;
  next_attempt_at: string | null;
  given_up: boolean;
  trigger: DeliveryTrigger;
}

/** `status`: the delivery process's record of the last attempt (older documents carry it themselves). */
function toWebhook(doc: WebhookDoc, status?: WebhookStatusDoc | null): Webhook {
  const last = status ?? doc;
  return {
    id: doc._id,
    url: doc.url,
    events: doc.events,
    description: doc.description,
    enabled: doc.enabled !== false,
    // Disabled before the reason was kept: by hand (only PATCH could disable then).
    disabled_reason: doc.enabled === false ? (doc.disabled_reason ?? 'manual') : null,
    disabled_at: doc.enabled === false && doc.disabled_at ? doc.disabled_at.toISOString() : null,
    rate_limit: doc.rate_limit ?? null,
    ordering: doc.ordering ?? 'unordered',
    headers: maskHeaders(doc.header_names),
    created_at: doc.created_at.toISOString(),
    last_status: last.last_status ?? null,
    last_delivery_at: last.last_delivery_at ? last.last_delivery_at.toISOString() : null,
    last_error: last.last_error ?? null,
  };
}

/** A stored attempt as the API shows it (a subscription's attempts, an event's detail). */
export function attemptView(doc: AttemptDoc): Attempt {
  return {
    id: doc._id,
    delivery_id: doc.delivery_id,
    event_id: doc.event_id,
    event_type: doc.event_type,
    attempt: doc.attempt,
    status: doc.status,
    outcome: doc.outcome,
    error: doc.error,
    duration_ms: doc.duration_ms,
    at: doc.at.toISOString(),
    next_attempt_at: doc.next_attempt_at ? doc.next_attempt_at.toISOString() : null,
    // Failed with nothing scheduled after it: the delivery was given up here (POST …/recover queues it again).
    given_up: doc.outcome !== 'ok' && doc.next_attempt_at === null,
    trigger: doc.trigger ?? 'event',
  };
}

/** The caller's subscription or 404 (unknown id, malformed id and another account's id alike). */
export async function findOwned(deps: WebhookDeps, accountId: string, id: string): Promise<WebhookDoc> {
  if (!WEBHOOK_ID.test(id)) throw notFound('Webhook');
  const doc = await deps.mongo.collections.webhooks.findOne({ _id: id, account_id: accountId });
  if (!doc) throw notFound('Webhook');
  return doc;
}

export async function listWebhooks(deps: WebhookDeps, accountId: string): Promise<{ webhooks: Webhook[] }> {
  const { webhooks, webhookStatus } = deps.mongo.collections;
  const docs = await webhooks.find({ account_id: accountId }).sort({ created_at: 1, _id: 1 }).toArray();
  const statuses = docs.length === 0 ? [] : await webhookStatus.find({ _id: { $in: docs.map((d) => d._id) } }).toArray();
  const byId = new Map(statuses.map((s) => [s._id, s]));
  return { webhooks: docs.map((d) => toWebhook(d, byId.get(d._id))) };
}

export async function getWebhook(deps: WebhookDeps, accountId: string, id: string): Promise<Webhook> {
  const doc = await findOwned(deps, accountId, id);
  return toWebhook(doc, await deps.mongo.collections.webhookStatus.findOne({ _id: doc._id }));
}

/**
 * Resolves and checks the URL; 400 naming the rule it broke (never the
 * address a name resolved to), 429 when the account has its cap of DNS
 * lookups in flight, 503 when DNS cannot answer now (the resolver's own
 * timeout, DNS_TIMEOUT_MS, bounds the wait).
 */
async function assertSafeUrl(deps: WebhookDeps, accountId: string, url: string): Promise<string> {
  const wh = deps.config.webhooks;
  let verdict: Verdict;
  try {
    verdict = await checkWebhookUrl(url, { allowPrivate: wh.allowPrivateTargets, allowedPorts: wh.allowedPorts }, deps.resolveHost, { account: accountId });
  } catch (err) {
    if ((err as { code?: string }).code === LOOKUP_LIMIT) {
      throw new AppError('rate_limited', `Too many webhook URL checks in flight for this account (at most ${wh.dns.maxLookupsPerAccount}); try again shortly`, undefined, { 'Retry-After': '1' });
    }
    throw unavailable('DNS resolution');
  }
  if (!verdict.ok) throw validationFailed([{ path: 'url', message: verdict.message }], `url is not allowed: ${verdict.message}`);
  // Store the parser's canonical form: what was checked is exactly what will be dialled.
  const parsed = parseWebhookUrl(url);
  return 'url' in parsed ? parsed.url.href : url;
}

/** 400 naming the first header refused (every problem in `details`). */
function assertHeaders(headers: Record<string, string>): void {
  const problems = checkHeaders(headers);
  if (problems.length > 0) throw validationFailed(problems, `headers: ${problems[0]!.message}`);
}

/** The stored form of a subscription's custom headers: sealed values, plain names; none: both unset. */
function sealHeaders(deps: WebhookDeps, id: string, headers: Record<string, string>): { headers_enc: string; header_names: string[] } | null {
  const names = Object.keys(headers);
  if (names.length === 0) return null;
  return { headers_enc: deps.secretBox.seal(JSON.stringify(headers), headersAad(id)), header_names: names };
}

function assertEvents(events: string[]): void {
  if (events.includes('*') && events.length > 1) {
    throw validationFailed([{ path: 'events', message: 'must be exactly ["*"] or a list of event types' }]);
  }
}

const DUPLICATE_KEY = 11000;

/**
 * Creates a subscription and returns it with its secret. The cap holds under
 * concurrent creates: each subscription takes one of the account's `cap`
 * slots by inserting with a unique (account, slot) key, so two creates can
 * never both take the last free slot (no transactions needed).
 */
export async function createWebhook(deps: WebhookDeps, accountId: string, input: CreateWebhookInput): Promise<Webhook & { secret: string }> {
  assertEvents(input.events);
  if (input.headers) assertHeaders(input.headers);
  const { webhooks } = deps.mongo.collections;
  const cap = deps.config.webhooks.maxPerAccount;
  const full = (): AppError => new AppError('conflict', `An account may have at most ${cap} webhooks; delete one first`);
  const taken = await webhooks.find({ account_id: accountId }, { projection: { slot: 1 } }).toArray();
  if (taken.length >= cap) throw full();
  const url = await assertSafeUrl(deps, accountId, input.url);

  const id = 'wh_' + randomBytes(12).toString('hex');
  const secret = newWebhookSecret();
  const used = new Set(taken.map((d) => d.slot));
  for (let slot = 0; slot < cap; slot++) {
    if (used.has(slot)) continue;
    const before = deps.clock().getTime();
    const doc: WebhookDoc = {
      _id: id,
      account_id: accountId,
      url,
      events: input.events,
      description: input.description ?? '',
      secret_enc: deps.secretBox.seal(secret, id),
      slot,
      // Active from a fence ahead (shared/src/subscription-fence.ts): delivery processes match
      // events against a table of subscriptions loaded a moment ago, which then holds it.
      created_at: new Date(before + SUBSCRIPTION_FENCE_MS),
      last_status: null,
      last_delivery_at: null,
      last_error: null,
      enabled: true,
      rate_limit: input.rate_limit ?? null,
      ordering: input.ordering ?? 'unordered',
      ...sealHeaders(deps, id, input.headers ?? {}),
    };
    try {
      await webhooks.insertOne(doc);
    } catch (err) {
      if ((err as { code?: number }).code !== DUPLICATE_KEY) throw err;
      // A concurrent create took this slot first: try the next one.
      continue;
    }
    doc.created_at = await activateAt(deps, id, 'created_at', before, doc.created_at);
    return { ...toWebhook(doc), secret };
  }
  throw full();
}

/**
 * After the write that stored `field` (created_at or enabled_at) as `at`
 * (the write began at `before`): when the write took longer than half the
 * fence, pushes the time to now + fence with one more update; then waits
 * until that time has come (shared/src/subscription-fence.ts: stored at least
 * half a fence before it becomes active). Returns the time stored.
 */
async function activateAt(deps: WebhookDeps, id: string, field: 'created_at' | 'enabled_at', before: number, at: Date): Promise<Date> {
  let active = at;
  const after = deps.clock().getTime();
  if (after - before > SUBSCRIPTION_FENCE_MS / 2) {
    active = new Date(after + SUBSCRIPTION_FENCE_MS);
    await deps.mongo.collections.webhooks.updateOne({ _id: id }, { $set: { [field]: active } });
  }
  await waitUntilTime(active, () => deps.clock().getTime());
  return active;
}

/**
 * Changes any of url, events, description and enabled; the URL goes through
 * the same checks as at creation. The delivery process reads the
 * subscription right before every send, so once this returns:
 * - `enabled: false`: nothing more is sent to it. Deliveries already queued
 *   or waiting to be retried are given up when their turn comes (state
 *   `failed`, outcome `subscription_disabled`), never sent later.
 * - `enabled: true` again (from false): like a new subscription, it gets the
 *   events that occur from now on (`enabled_at`), not those of the time it
 *   was disabled.
 * - a new url or events list applies to every send from now on (a retry of
 *   an older delivery goes to the new url; one of an event type no longer
 *   taken is dropped unsent).
 * - new `headers` replace the whole set: every send from now on, queued
 *   retries included, carries them (`{}`: none).
 */
export async function updateWebhook(deps: WebhookDeps, accountId: string, id: string, input: UpdateWebhookInput): Promise<Webhook> {
  const current = await findOwned(deps, accountId, id);
  if (input.events) assertEvents(input.events);
  if (input.headers) assertHeaders(input.headers);
  const set: Partial<WebhookDoc> = {};
  if (input.url !== undefined) set.url = await assertSafeUrl(deps, accountId, input.url);
  // Another endpoint: its health is counted afresh (delivery/src/endpoint-health.ts).
  if (set.url !== undefined && set.url !== current.url) set.url_changed_at = deps.clock();
  if (input.events !== undefined) set.events = input.events;
  if (input.description !== undefined) set.description = input.description;
  if (input.rate_limit !== undefined) set.rate_limit = input.rate_limit;
  if (input.ordering !== undefined) set.ordering = input.ordering;
  const unset: Partial<Record<'disabled_reason' | 'disabled_at' | 'headers_enc' | 'header_names', ''>> = {};
  if (input.headers !== undefined) {
    // The whole set is replaced; {} removes them all.
    const sealed = sealHeaders(deps, id, input.headers);
    if (sealed) Object.assign(set, sealed);
    else Object.assign(unset, { headers_enc: '', header_names: '' });
  }
  if (input.enabled !== undefined) {
    set.enabled = input.enabled;
    // Why and since when: kept as they are when it was disabled already (by the delivery process, say).
    if (!input.enabled && current.enabled !== false) Object.assign(set, { disabled_reason: 'manual', disabled_at: deps.clock() });
    if (input.enabled) Object.assign(unset, { disabled_reason: '', disabled_at: '' });
  }
  const before = deps.clock().getTime();
  // Re-enabled: like a new subscription, active from a fence ahead (shared/src/subscription-fence.ts).
  if (input.enabled && current.enabled === false) set.enabled_at = new Date(before + SUBSCRIPTION_FENCE_MS);
  const res = await deps.mongo.collections.webhooks.updateOne({ _id: id, account_id: accountId }, Object.keys(unset).length > 0 ? { $set: set, $unset: unset } : { $set: set });
  if (res.matchedCount === 0) throw notFound('Webhook'); // deleted meanwhile
  const stored = deps.clock().getTime();
  // Re-enabled: returned once enabled_at has come (pushed if the write was slow).
  if (set.enabled_at) await activateAt(deps, id, 'enabled_at', before, set.enabled_at);
  // A changed url, enabled, events list, rate limit, ordering or headers: nothing is sent under the old one
  // once this returns (a fence after the change was stored; the wait for enabled_at may have covered it).
  // An ordering change applies to the deliveries of events that occur from then on.
  if (set.url !== undefined || set.enabled !== undefined || set.events !== undefined || set.rate_limit !== undefined || set.ordering !== undefined || input.headers !== undefined) await waitUntilTime(new Date(stored + SUBSCRIPTION_FENCE_MS), () => deps.clock().getTime());
  return getWebhook(deps, accountId, id);
}

/** Deletes the subscription; its pending deliveries are dropped and its attempt log removed. */
export async function deleteWebhook(deps: WebhookDeps, accountId: string, id: string): Promise<void> {
  if (!WEBHOOK_ID.test(id)) throw notFound('Webhook');
  const { webhooks, webhookStatus, deliveries, attempts, secretRotations } = deps.mongo.collections;
  const res = await webhooks.deleteOne({ _id: id, account_id: accountId });
  if (res.deletedCount === 0) throw notFound('Webhook');
  // Best effort: the delivery process also drops deliveries whose subscription is gone. The
  // answer (an error included) waits for the fence all the same: the subscription is gone.
  const fenced = fence();
  try {
    await Promise.all([
      deliveries.deleteMany({ subscription_id: id }),
      attempts.deleteMany({ subscription_id: id }),
      webhookStatus.deleteOne({ _id: id }),
      secretRotations.deleteMany({ subscription_id: id }),
    ]);
  } finally {
    await fenced;
  }
}

/**
 * Returns SUBSCRIPTION_FENCE_MS after a change to what deliveries send (the
 * subscription gone, disabled, another URL or secret) was stored: a request a
 * delivery process writes after that saw the change (shared/src/subscription-fence.ts).
 */
function fence(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, SUBSCRIPTION_FENCE_MS));
}

/** The current secret (never the one a rotation replaced, even during its grace period). */
export async function revealSecret(deps: WebhookDeps, accountId: string, id: string): Promise<{ secret: string }> {
  const doc = await findOwned(deps, accountId, id);
  return { secret: deps.secretBox.open(doc.secret_enc, doc._id) };
}

/**
 * A rotation claim older than this whose rotation never wrote the subscription
 * (its process died between the claim and the write) no longer blocks the
 * next generation. A rotation writes right after its claim.
 */
export const ROTATION_CLAIM_STALE_MS = 30_000;

interface RotatedSecret {
  secret: string;
  /** Until when the replaced secret still signs deliveries; null with grace_period_s 0. */
  previous_secret_expires_at: string | null;
}

/** Test hook: runs after the subscription was read and before the rotation claims its generation. */
interface RotateHooks {
  afterRead?: () => Promise<void>;
}

function rotationConflict(): AppError {
  return new AppError('conflict', 'The secret was being rotated by another request at the same moment; show it with POST …/secret, or rotate again');
}

/**
 * Takes the claim on the subscription's next secret generation by insert.
 * A claim already there is another rotation of the same generation: 409,
 * unless it is stale (its rotation died before writing), then the next
 * generation is tried.
 */
async function claimGeneration(deps: WebhookDeps, doc: WebhookDoc, now: Date): Promise<number> {
  const { secretRotations } = deps.mongo.collections;
  let generation = (doc.secret_gen ?? 0) + 1;
  for (let tries = 0; tries < 5; tries++, generation++) {
    const _id = `${doc._id}:${generation}`;
    try {
      await secretRotations.insertOne({ _id, subscription_id: doc._id, at: now });
      return generation;
    } catch (err) {
      if ((err as { code?: number }).code !== DUPLICATE_KEY) throw err;
    }
    const held = await secretRotations.findOne({ _id });
    if (held && now.getTime() - held.at.getTime() < ROTATION_CLAIM_STALE_MS) throw rotationConflict();
  }
  throw rotationConflict();
}

/**
 * Replaces the signing secret with a new `whsec_` one and returns it. For
 * `grace_period_s` the replaced secret signs deliveries too (a second `v1,`
 * value in `webhook-signature`; `X-Service-Signature` uses the new one), so
 * receivers can switch without failing a delivery; never after. At most two
 * secrets: a rotation during the grace period of the last one drops the
 * oldest at once. Two rotations of one subscription at the same moment:
 * one writes, the other is a 409 (each first claims the next generation by
 * a unique insert), so no secret that was handed out is silently lost.
 */
export async function rotateSecret(deps: WebhookDeps, accountId: string, id: string, input: RotateSecretInput, hooks: RotateHooks = {}): Promise<RotatedSecret> {
  const doc = await findOwned(deps, accountId, id);
  await hooks.afterRead?.();
  const now = deps.clock();
  const generation = await claimGeneration(deps, doc, now);
  const secret = newWebhookSecret();
  const secretEnc = deps.secretBox.seal(secret, id);
  const expires = input.grace_period_s > 0 ? new Date(now.getTime() + input.grace_period_s * 1000) : null;
  const update = expires
    ? { $set: { secret_enc: secretEnc, secret_gen: generation, previous_secret_enc: doc.secret_enc, previous_secret_expires_at: expires } }
    : { $set: { secret_enc: secretEnc, secret_gen: generation }, $unset: { previous_secret_enc: '' as const, previous_secret_expires_at: '' as const } };
  const res = await deps.mongo.collections.webhooks.updateOne({ _id: id, account_id: accountId }, update);
  if (res.matchedCount === 0) throw notFound('Webhook'); // deleted meanwhile
  await fence();
  return { secret, previous_secret_expires_at: expires ? expires.toISOString() : null };
}

/**
 * Fires a `webhook.ping` at one subscription. It goes through the event log
 * like every event (polling, long-poll and SSE see it too); the delivery
 * process sends it to the targeted subscription only. Resolves once the log
 * has it, not when it is delivered.
 */
export async function pingWebhook(deps: WebhookDeps, accountId: string, id: string): Promise<{ event_id: string }> {
  const sub = await findOwned(deps, accountId, id);
  const envelope = buildEnvelope(
    { account_id: accountId, type: 'webhook.ping', data: { subscription_id: sub._id }, target_subscription_id: sub._id },
    deps.clock(),
  );
  await deps.events.producer.publish([envelope]);
  deps.metrics.eventsIngested.inc({ type: envelope.type });
  return { event_id: envelope.id };
}

/** Recent delivery attempts of one subscription, newest first. */
export async function listDeliveries(deps: WebhookDeps, accountId: string, id: string, opts: { limit?: number } = {}): Promise<{ attempts: Attempt[] }> {
  await findOwned(deps, accountId, id);
  const docs = await deps.mongo.collections.attempts
    .find({ subscription_id: id })
    .sort({ at: -1, _id: -1 })
    .limit(opts.limit ?? DEFAULT_ATTEMPTS_LIMIT)
    .toArray();
  return { attempts: docs.map(attemptView) };
}
