/**
 * The subscriptions' last_* fields, written in their own document
 * (webhook_status, never the subscription's, which only the API writes),
 * coalesced per subscription (the latest attempt wins), each write carrying
 * endpoint health's failing_since (endpoint-health.ts).
 */
import type { Filter } from 'mongodb';
import type { Logger } from '#shared/log.js';
import type { WebhookStatusDoc } from '#shared/mongo/index.js';
import type { AttemptRecord, DeliveryCollections } from './deliveries.js';
import type { EndpointHealth, FailingUpdate } from './endpoint-health.js';

/** A subscription's last_* fields are written at most once per this long (the latest attempt wins). */
const STATUS_COALESCE_MS = 250;

const DUPLICATE_KEY = 11000;

/**
 * Coalesces the subscriptions' last_* writes: a subscription not written in
 * the last STATUS_COALESCE_MS is written at once (with little traffic the
 * status is there as soon as the attempt is); otherwise its latest attempt
 * waits for the end of that window and is written then, once.
 */
/** A flush waits for its status writes when there are at most this many (see write). */
const AWAITED_STATUS_WRITES = 4;

export class StatusWriter {
  private readonly lastWrite = new Map<string, number>();
  private readonly waiting = new Map<string, AttemptRecord>();
  private timer: NodeJS.Timeout | null = null;
  private writing: Promise<void> = Promise.resolve();

  constructor(
    private readonly c: DeliveryCollections,
    private readonly log?: Logger,
    /** Its failing_since goes with each write (endpoint-health.ts). */
    private readonly health?: EndpointHealth,
  ) {}

  offer(records: AttemptRecord[]): Promise<void> {
    const now = Date.now();
    if (this.health) for (const r of records) this.health.note(r);
    const due: AttemptRecord[] = [];
    for (const r of latestPerSubscription(records)) {
      const id = r.delivery.subscription_id;
      const seen = this.waiting.get(id);
      const latest = seen && seen.at.getTime() > r.at.getTime() ? seen : r;
      if (now - (this.lastWrite.get(id) ?? 0) >= STATUS_COALESCE_MS && !this.waiting.has(id)) {
        this.lastWrite.set(id, now);
        due.push(latest);
      } else {
        this.waiting.set(id, latest);
        this.arm();
      }
    }
    if (due.length === 0) return Promise.resolve();
    const written = this.write(due);
    if (due.length <= AWAITED_STATUS_WRITES) return written;
    written.catch((err: unknown) => this.log?.warn({ err }, 'could not write subscriptions\' last delivery status'));
    return Promise.resolve();
  }

  flushAll(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const all = [...this.waiting.values()];
    this.waiting.clear();
    return all.length > 0 ? this.write(all).then(() => this.writing) : this.writing;
  }

  private arm(): void {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      const now = Date.now();
      const due: AttemptRecord[] = [];
      for (const [id, r] of this.waiting) {
        if (now - (this.lastWrite.get(id) ?? 0) < STATUS_COALESCE_MS) continue;
        this.waiting.delete(id);
        this.lastWrite.set(id, now);
        due.push(r);
      }
      if (this.waiting.size > 0) this.arm();
      this.write(due).catch((err: unknown) => this.log?.warn({ err }, 'could not write subscriptions\' last delivery status'));
    }, STATUS_COALESCE_MS);
    this.timer.unref();
    if (this.lastWrite.size > 10_000) this.forgetOld();
  }

  private forgetOld(): void {
    const cutoff = Date.now() - STATUS_COALESCE_MS;
    for (const [id, at] of this.lastWrite) if (at < cutoff) this.lastWrite.delete(id);
  }

  /** One writer at a time, in order. */
  private write(records: AttemptRecord[]): Promise<void> {
    const run = this.writing.then(async () => {
      for (const r of latestPerSubscription(records)) {
        const [filter, update] = subscriptionUpdate(r);
        const failing = this.health?.statusUpdate(filter._id) ?? {};
        await writeStatus(this.c, filter, { ...update, ...failing, $set: { ...update.$set, ...failing.$set } });
        this.health?.written(filter._id, r);
      }
    });
    this.writing = run.catch(() => undefined);
    return run;
  }
}

function latestPerSubscription(records: AttemptRecord[]): AttemptRecord[] {
  const latest = new Map<string, AttemptRecord>();
  for (const r of records) {
    const seen = latest.get(r.delivery.subscription_id);
    if (!seen || seen.at.getTime() <= r.at.getTime()) latest.set(r.delivery.subscription_id, r);
  }
  return [...latest.values()];
}
/**
 * One write per subscription: its attempt that started last. Attempts of one
 * subscription run concurrently, so the stored last_delivery_at guards against
 * an earlier-started attempt overwriting a later one from another flush.
 */
export function subscriptionUpdates(records: AttemptRecord[]): [Filter<WebhookStatusDoc> & { _id: string }, StatusUpdate][] {
  return latestPerSubscription(records).map(subscriptionUpdate);
}

type StatusUpdate = { $set: Omit<WebhookStatusDoc, '_id'> } & Omit<FailingUpdate, '$set'>;

function subscriptionUpdate(r: AttemptRecord): [Filter<WebhookStatusDoc> & { _id: string }, StatusUpdate] {
  return [
    { _id: r.delivery.subscription_id, last_delivery_at: { $lte: r.at } },
    { $set: { last_status: r.status, last_delivery_at: r.at, last_error: r.status === null ? r.outcome : null } },
  ];
}

/**
 * The guarded update; when it matches nothing, the status document may not
 * exist yet: insert it. A concurrent insert wins the _id: then the guarded
 * update is tried once more (it applies only if ours is the later attempt).
 */
async function writeStatus(c: DeliveryCollections, filter: Filter<WebhookStatusDoc> & { _id: string }, update: StatusUpdate): Promise<void> {
  const res = await c.webhookStatus.updateOne(filter, update);
  if (res.matchedCount > 0) return;
  try {
    await c.webhookStatus.insertOne({ _id: filter._id, ...update.$set, ...update.$min });
  } catch (err) {
    if ((err as { code?: number }).code !== DUPLICATE_KEY) throw err;
    await c.webhookStatus.updateOne(filter, update);
  }
}
