import { randomBytes } from 'node:crypto';
import type { MongoClient } from 'mongodb';
import type { AttemptDoc, DeliveryDoc } from '#shared/mongo/index.js';

export const MIN = 60_000;
const hex = (n: number): string => randomBytes(n).toString('hex');

/** Writes attempts (and deliveries) as delivery/src/recorder.ts does: the same collections and fields. */
export class ActivityDb {
  constructor(private readonly db: ReturnType<MongoClient['db']>) {}

  async attempt(a: { subscription: string; account: string; at: Date; outcome: AttemptDoc['outcome']; status: number | null; ms: number; retry?: boolean; delivery?: string; event?: string; attempt?: number; type?: AttemptDoc['event_type']; id?: string }): Promise<AttemptDoc> {
    const doc: AttemptDoc = {
      _id: a.id ?? `att_${hex(12)}`,
      delivery_id: a.delivery ?? `dlv_${hex(12)}`,
      subscription_id: a.subscription,
      account_id: a.account,
      event_id: a.event ?? `evt_${hex(12)}`,
      event_type: a.type ?? 'call.completed',
      attempt: a.attempt ?? 1,
      status: a.status,
      outcome: a.outcome,
      error: a.status === null ? 'connect ECONNREFUSED' : null,
      duration_ms: a.ms,
      at: a.at,
      next_attempt_at: a.retry ? new Date(a.at.getTime() + MIN) : null,
    };
    await this.db.collection<AttemptDoc>('delivery_attempts').insertOne(doc);
    return doc;
  }

  async delivery(d: { id?: string; subscription: string; account: string; event: string; state: DeliveryDoc['state']; attempts: number; lastStatus: number | null; createdAt: Date }): Promise<DeliveryDoc> {
    const doc: DeliveryDoc = {
      _id: d.id ?? `dlv_${hex(12)}`,
      account_id: d.account,
      subscription_id: d.subscription,
      event_id: d.event,
      event_type: 'call.completed',
      body: '{}',
      state: d.state,
      attempts: d.attempts,
      next_attempt_at: d.state === 'pending' ? new Date(d.createdAt.getTime() + MIN) : null,
      claim_seq: d.attempts,
      lease_owner: null,
      lease_until: null,
      last_status: d.lastStatus,
      last_outcome: d.lastStatus === null ? null : d.lastStatus < 300 ? 'ok' : 'http_5xx',
      created_at: d.createdAt,
      updated_at: d.createdAt,
    };
    await this.db.collection<DeliveryDoc>('deliveries').insertOne(doc);
    return doc;
  }
}

