/**
 * Operational notifications: the delivery process writes an event to the
 * account's own log when it disables a subscription for failing
 * (`webhook.disabled`) and when it gives a delivery up for good
 * (`webhook.delivery_exhausted`: retries exhausted or a permanent failure).
 * They are produced like every other event (shared/src/eventlog: key =
 * account, idempotent producer, acks from all in-sync replicas), so polling,
 * long-poll, streams and webhooks carry them.
 *
 * Opt-in: an event is written only for an account one of whose
 * subscriptions lists its type by name (`"*"` does not count, and does not
 * receive it either: shared/src/eventlog/types.ts `subscriptionTakes`).
 * Nothing changes for an account that has not asked.
 *
 * Each notification's id is derived from what it is about (the delivery id;
 * the subscription and the enabling it was disabled from), so two processes,
 * a retried record or a restart that writes it again produce the same id, and
 * the materializer keeps one event per id. The data holds no secret: ids, the
 * URL (shown by every subscription read), outcome and status.
 */
import { createHash } from 'node:crypto';
import type { Collection } from 'mongodb';
import { isOperationalEventType, type EventEnvelope, type OperationalEventType } from '#shared/eventlog/types.js';
import type { Logger } from '#shared/log.js';
import type { WebhookDoc } from '#shared/mongo/index.js';
import { isGiveUp, type AttemptRecord } from './deliveries.js';
import { giveUpReason } from './retry-policy.js';

/** What produces to the events topic (EventLog.publish). */
type Publish = (envelopes: EventEnvelope[]) => Promise<unknown>;

/** The id of a notification: the same for the same disable or give-up, wherever and however often it is written. */
export function notificationId(type: OperationalEventType, key: string): string {
  return 'evt_' + createHash('sha256').update(`${type}\n${key}`).digest('hex').slice(0, 24);
}

/** A subscription as disabled by endpoint health. */
export interface DisabledSubscription {
  _id: string;
  account_id: string;
  url: string;
  /** Since when (the enabling) it was counted: with the id, names this disabling among all of the subscription's. */
  counted_from: Date;
  failing_since: Date;
  disabled_at: Date;
}

/** The subscriptions of accounts as the process holds them in memory (subscription-table.ts); null when not fresh enough. */
interface AccountSubscriptions {
  forEvents(accounts: string[], newestEventAt: number): Map<string, WebhookDoc[]> | null;
}

/** Where a subscription points, as a notification shows it: the origin only (a path or query may carry the receiver's own secret). */
function originOf(url: string | undefined): string | null {
  if (!url) return null;
  try {
    return new URL(url).origin;
  } catch {
    return null;
  }
}

/**
 * A give-up worth a notification: a failed attempt with no next one, of a delivery that is not itself an
 * operational event (a notification whose delivery failed for good is not notified: with two subscriptions
 * listing the type and failing for good, each would be told of the other's give-up, for ever, doubling).
 */
function notifiable(r: AttemptRecord): boolean {
  return isGiveUp(r) && !isOperationalEventType(r.delivery.event_type);
}

export class Notifications {
  constructor(
    private readonly publish: Publish,
    private readonly webhooks: Collection<WebhookDoc>,
    private readonly clock: () => Date,
    private readonly log?: Logger,
    private readonly table?: AccountSubscriptions,
  ) {}

  /**
   * After a subscription was disabled for failing. Tried a few times (the
   * disable is already written: nothing else would write this again, so a
   * crash before Kafka acknowledged loses it; the subscription still shows
   * `disabled_reason` and `disabled_at`).
   */
  async subscriptionDisabled(sub: DisabledSubscription): Promise<void> {
    const subs = await this.retried(() => this.optedIn(sub.account_id, 'webhook.disabled'));
    if (!subs) return;
    const envelope = this.envelope(sub.account_id, 'webhook.disabled', `${sub._id}\n${sub.counted_from.getTime()}`, {
      subscription_id: sub._id,
      url: originOf(sub.url),
      reason: 'endpoint_failing',
      failing_since: sub.failing_since.toISOString(),
      disabled_at: sub.disabled_at.toISOString(),
    });
    await this.retried(() => this.publish([envelope]));
  }

  private async retried<T>(fn: () => Promise<T>): Promise<T> {
    for (let tries = 1; ; tries++) {
      try {
        return await fn();
      } catch (err) {
        if (tries >= 5) throw err;
        await new Promise((r) => setTimeout(r, 500 * tries));
      }
    }
  }

  /**
   * Told of an attempt that gives its delivery up, before its record is
   * written (the dispatcher awaits it): the notification is on the log first,
   * so a crash before the record leaves the delivery to be sent, given up and
   * notified again under the same id, and no crash loses it. Tried a few
   * times; never rejects (a log that stays down is logged, and the record
   * goes ahead).
   */
  async givenUp(r: AttemptRecord): Promise<void> {
    if (!notifiable(r)) return;
    await this.retried(() => this.deliveriesGivenUp([r])).catch((err: unknown) =>
      this.log?.warn({ err, delivery: r.delivery._id }, 'could not write the webhook.delivery_exhausted notification'),
    );
  }

  /** The give-ups among `records` (failed attempts with no next one), for the accounts that asked. */
  async deliveriesGivenUp(records: AttemptRecord[]): Promise<void> {
    const givenUp = records.filter(notifiable);
    if (givenUp.length === 0) return;
    const envelopes: EventEnvelope[] = [];
    const byAccount = new Map<string, Map<string, WebhookDoc> | null>();
    for (const r of givenUp) {
      const d = r.delivery;
      if (!byAccount.has(d.account_id)) byAccount.set(d.account_id, await this.optedIn(d.account_id, 'webhook.delivery_exhausted'));
      const subs = byAccount.get(d.account_id);
      if (!subs) continue;
      envelopes.push(
        this.envelope(d.account_id, 'webhook.delivery_exhausted', d._id, {
          subscription_id: d.subscription_id,
          url: originOf(subs.get(d.subscription_id)?.url),
          delivery_id: d._id,
          event_id: d.event_id,
          event_type: d.event_type,
          reason: giveUpReason(r) === 'permanent' ? 'permanent_failure' : 'retries_exhausted',
          attempts: r.attempt,
          last_outcome: r.outcome,
          last_status: r.status,
          last_attempt_at: r.at.toISOString(),
        }),
      );
    }
    if (envelopes.length > 0) await this.publish(envelopes);
  }

  /** The account's subscriptions by id when one of them lists `type` by name (the opt-in), else null. */
  private async optedIn(accountId: string, type: OperationalEventType): Promise<Map<string, WebhookDoc> | null> {
    // From memory when the table is fresh enough to hold every subscription created until now (as matching
    // reads it), so a give-up of an account that never opted in costs no store query; else from the store.
    const held = this.table?.forEvents([accountId], this.clock().getTime());
    const subs = held ? (held.get(accountId) ?? []) : await this.webhooks.find({ account_id: accountId }, { projection: { _id: 1, url: 1, events: 1 } }).toArray();
    if (!subs.some((s) => s.events.includes(type))) return null;
    return new Map(subs.map((s) => [s._id, s as WebhookDoc]));
  }

  private envelope(accountId: string, type: OperationalEventType, key: string, data: Record<string, unknown>): EventEnvelope {
    this.log?.info({ account: accountId, type, subject: key.split('\n')[0] }, 'operational notification');
    return { id: notificationId(type, key), account_id: accountId, type, created_at: this.clock().toISOString(), data };
  }
}
