/**
 * Endpoint health: a subscription whose attempts have all failed for
 * WEBHOOK_DISABLE_AFTER (default 5 days, as Svix) is disabled, as a PATCH
 * enabled:false would (`enabled: false`), with `disabled_reason:
 * 'endpoint_failing'` and `disabled_at`. Every process then sees it by its
 * pre-send read (dispatch.ts): nothing more is sent, retrying deliveries are
 * given up.
 *
 * Since when a subscription has been failing is kept in its status document
 * (`failing_since`, next to last_*), written with the same coalesced write
 * (recorder.ts): the first failure after a success sets it, a success
 * removes it. It survives a restart and is shared by every delivery process.
 *
 * FerretDB applies an update as read-then-write, so two processes writing
 * one status document can lose one write: a lost "set" leaves the field
 * unset until the next failed write (the disabling comes one write later), a
 * lost "remove" leaves a stale, too early value. The stored value is
 * therefore only a hint of when to look: the decision is taken on the
 * attempts themselves (the first failure after the last success, read from
 * the attempt log), so a lost race can delay a disabling but never disable an
 * endpoint that succeeded within the period. A re-enabled subscription
 * counts from its re-enabling (`enabled_at`), not from its old failures.
 */
import type { Logger } from '#shared/log.js';
import type { DisabledReason, WebhookStatusDoc } from '#shared/mongo/index.js';
import type { AttemptRecord, DeliveryCollections } from './deliveries.js';
import type { DisabledSubscription } from './notifications.js';

const ENDPOINT_FAILING: DisabledReason = 'endpoint_failing';

/** 5 days, as Svix. */
export const DEFAULT_DISABLE_AFTER_MS = 5 * 24 * 3600 * 1000;

type HealthCollections = Pick<DeliveryCollections, 'webhooks' | 'webhookStatus' | 'attempts'>;

/** What the attempts recorded since a subscription's last status write say (times in ms). */
interface Mark {
  okAt: number | null;
  /** Earliest and latest failure after okAt (the earliest is exact until a later success arrives out of order; then the latest stands in: later, never earlier). */
  failMin: number | null;
  failMax: number | null;
}

/** The failing_since part of a status write. */
export type FailingUpdate = { $set?: Pick<WebhookStatusDoc, 'failing_since'>; $min?: Pick<WebhookStatusDoc, 'failing_since'>; $unset?: { failing_since: '' } };

/** Metrics and the webhook.disabled notification: told of each subscription this process disabled. */
type OnDisabled = (sub: DisabledSubscription) => void;

const MAX_TRACKED = 100_000;

export class EndpointHealth {
  private readonly marks = new Map<string, Mark>();
  /** Failing subscriptions: not worth looking at before this time (ms). */
  private readonly notBefore = new Map<string, number>();
  private readonly checking = new Set<string>();

  constructor(
    private readonly c: HealthCollections,
    readonly periodMs: number,
    private readonly clock: () => Date,
    private readonly log?: Logger,
    private readonly onDisabled?: OnDisabled,
  ) {}

  /** Every recorded attempt, before the coalesced status write that covers it. */
  note(r: AttemptRecord): void {
    const id = r.delivery.subscription_id;
    const at = r.at.getTime();
    let m = this.marks.get(id);
    if (!m) {
      if (this.marks.size > MAX_TRACKED) this.marks.clear();
      m = { okAt: null, failMin: null, failMax: null };
      this.marks.set(id, m);
    }
    if (r.outcome === 'ok') {
      if (m.okAt !== null && at <= m.okAt) return;
      m.okAt = at;
      if (m.failMax === null || m.failMax < at) {
        m.failMin = m.failMax = null;
      } else if (m.failMin !== null && m.failMin < at) m.failMin = m.failMax;
      return;
    }
    if (m.okAt !== null && at <= m.okAt) return;
    m.failMin = m.failMin === null ? at : Math.min(m.failMin, at);
    m.failMax = m.failMax === null ? at : Math.max(m.failMax, at);
  }

  /**
   * The failing_since part of `id`'s status write (and forgets what was
   * noted): a success in the window sets it to the first failure after it,
   * or removes it; failures only keep the earliest ($min: a value already
   * there stays).
   */
  statusUpdate(id: string): FailingUpdate {
    const m = this.marks.get(id);
    this.marks.delete(id);
    if (!m) return {};
    if (m.okAt !== null) return m.failMin === null ? { $unset: { failing_since: '' } } : { $set: { failing_since: new Date(m.failMin) } };
    return m.failMin === null ? {} : { $min: { failing_since: new Date(m.failMin) } };
  }

  /** After `id`'s status write whose latest attempt is `latest`: a failure may make it due for disabling. */
  written(id: string, latest: AttemptRecord): void {
    if (latest.outcome === 'ok') {
      this.notBefore.delete(id);
      return;
    }
    const now = this.clock().getTime();
    if ((this.notBefore.get(id) ?? 0) > now || this.checking.has(id)) return;
    this.checking.add(id);
    this.check(id, now)
      .catch((err: unknown) => this.log?.warn({ err, subscription: id }, 'could not check whether a failing endpoint is to be disabled'))
      .finally(() => this.checking.delete(id));
  }

  private later(id: string, at: number): void {
    if (this.notBefore.size > MAX_TRACKED) this.notBefore.clear();
    this.notBefore.set(id, at);
  }

  /** Resolves once decided (exposed for tests: `written` does not wait for it). */
  async check(id: string, now: number): Promise<void> {
    const { webhooks, webhookStatus, attempts } = this.c;
    const status = await webhookStatus.findOne({ _id: id }, { projection: { failing_since: 1 } });
    // Not there: its write was lost or a success just removed it; the next failed write sets it.
    const hint = status?.failing_since?.getTime();
    if (hint === undefined) return;
    if (hint + this.periodMs > now) return this.later(id, hint + this.periodMs);
    const sub = await webhooks.findOne({ _id: id }, { projection: { account_id: 1, enabled: 1, created_at: 1, enabled_at: 1, url: 1, url_changed_at: 1 } });
    if (!sub || sub.enabled === false) return this.later(id, now + this.periodMs);
    // Counted from the subscription's creation, re-enabling or change of URL at the earliest.
    const floor = Math.max(sub.created_at?.getTime() ?? 0, sub.enabled_at?.getTime() ?? 0, sub.url_changed_at?.getTime() ?? 0);
    if (floor + this.periodMs > now) return this.later(id, floor + this.periodMs);
    // The truth is the attempt log: a success after the hint (a removal lost to a race) moves
    // the start to the first failure after it.
    let start = Math.max(hint, floor);
    const ok = await attempts.find({ subscription_id: id, outcome: 'ok', at: { $gte: new Date(start) } }, { projection: { at: 1 } }).sort({ at: -1 }).limit(1).next();
    if (ok) {
      const failed = await attempts.find({ subscription_id: id, at: { $gt: ok.at } }, { projection: { at: 1 } }).sort({ at: 1 }).limit(1).next();
      start = failed ? Math.max(failed.at.getTime(), floor) : now;
    }
    if (start + this.periodMs > now) return this.later(id, start + this.periodMs);
    // The failures must span the period themselves: the clock at this check is not evidence. A
    // status write that came late (a loaded process or store) would otherwise disable an endpoint
    // last tried before the period was over, which may have answered the next attempt.
    const last = await attempts.find({ subscription_id: id, at: { $gte: new Date(start) } }, { projection: { at: 1, outcome: 1 } }).sort({ at: -1 }).limit(1).next();
    if (!last || last.outcome === 'ok' || last.at.getTime() < start + this.periodMs) return this.later(id, start + this.periodMs);
    const at = new Date(now);
    // The same write as PATCH enabled:false (plus why and since when); every process's pre-send read sees it.
    // Only the endpoint judged: a PATCH of the URL meanwhile leaves it enabled.
    const res = await webhooks.updateOne({ _id: id, url: sub.url, enabled: { $ne: false } }, { $set: { enabled: false, disabled_reason: ENDPOINT_FAILING, disabled_at: at } });
    this.later(id, now + this.periodMs);
    if (res.modifiedCount === 0) return;
    this.log?.warn({ subscription: id, failing_since: new Date(start), period_ms: this.periodMs }, 'subscription disabled: every attempt failed for the disabling period');
    // Named by its enabling (creation or last re-enabling): a subscription is disabled at most once per enabling.
    const countedFrom = new Date(Math.max(sub.created_at?.getTime() ?? 0, sub.enabled_at?.getTime() ?? 0));
    this.onDisabled?.({ _id: id, account_id: sub.account_id, url: sub.url, counted_from: countedFrom, failing_since: new Date(start), disabled_at: at });
  }
}

/** Disabled subscriptions by reason (the metrics gauge): `manual` counts every disabled one not disabled here. */
export async function countDisabled(c: Pick<DeliveryCollections, 'webhooks'>): Promise<Record<DisabledReason, number>> {
  const [all, failing] = await Promise.all([c.webhooks.countDocuments({ enabled: false }), c.webhooks.countDocuments({ enabled: false, disabled_reason: ENDPOINT_FAILING })]);
  return { manual: all - failing, endpoint_failing: failing };
}
