/**
 * Helpers for delivery-process tests: start a worker in-process with test
 * settings, put events on the real topic, and create subscriptions straight
 * in the real database.
 */
import { randomBytes } from 'node:crypto';
import { Kafka, Partitioners, logLevel, type RecordMetadata } from 'kafkajs';
import { MongoClient } from 'mongodb';
import { loadWebhookConfig } from '#shared/config/webhooks.js';
import type { EventEnvelope, EventType } from '#shared/eventlog/types.js';
import type { WebhookDoc } from '#shared/mongo/index.js';
import { SecretBox } from '#shared/secrets.js';
import { SUBSCRIPTION_FENCE_MS, waitUntilTime } from '#shared/subscription-fence.js';
import { newWebhookSecret } from '#shared/signing.js';
import type { Resolver } from '#shared/url-safety.js';
import { atFileEnd } from '#test-support/cleanup.js';
import { baseTestEnv, uniqueName } from '#test-support/env.js';
import { loadDeliveryConfig } from '../../src/config.js';
import { startDelivery, type RunningDelivery } from '../../src/worker.js';

/** Settings every delivery test wants: reach the local receiver, short retries, short leases. */
export function deliveryTestEnv(caFile: string, overrides: Record<string, string> = {}): Record<string, string> {
  return baseTestEnv({
    WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
    WEBHOOK_CA_FILE: caFile,
    WEBHOOK_RETRY_SCHEDULE: '1s,1s,1s',
    WEBHOOK_LEASE_MS: '15000',
    WEBHOOK_POLL_INTERVAL_MS: '200',
    DELIVERY_GROUP_ID: uniqueName('delivery-test'),
    INSTANCE_ID: uniqueName('dw'),
    ...overrides,
  });
}

export async function startTestDelivery(env: Record<string, string>, resolve?: Resolver): Promise<RunningDelivery> {
  const worker = await startDelivery(loadDeliveryConfig(env), { resolve });
  atFileEnd(() => worker.close());
  return worker;
}

/** Resolves when the worker's consumer group has its partitions (so produced events are seen). */
export async function waitForGroup(env: Record<string, string>): Promise<void> {
  const admin = new Kafka({ brokers: env.KAFKA_BROKERS!.split(','), logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  try {
    for (let i = 0; i < 150; i++) {
      const { groups } = await admin.describeGroups([env.DELIVERY_GROUP_ID!]);
      if (groups[0]?.state === 'Stable') return;
      await new Promise((r) => setTimeout(r, 200));
    }
    throw new Error('delivery consumer group never became stable');
  } finally {
    await admin.disconnect();
  }
}

export class TestLog {
  private readonly kafka: Kafka;
  private producer: ReturnType<Kafka['producer']> | null = null;

  constructor(private readonly env: Record<string, string>) {
    this.kafka = new Kafka({ brokers: env.KAFKA_BROKERS!.split(','), logLevel: logLevel.NOTHING });
    atFileEnd(() => this.producer?.disconnect());
  }

  private async connected(): Promise<ReturnType<Kafka['producer']>> {
    if (!this.producer) {
      this.producer = this.kafka.producer({ idempotent: true, maxInFlightRequests: 1, createPartitioner: Partitioners.DefaultPartitioner });
      await this.producer.connect();
    }
    return this.producer;
  }

  /** Produces all envelopes in one send (one batch for the consumer). */
  async publishAtOnce(envelopes: EventEnvelope[]): Promise<void> {
    const producer = await this.connected();
    await producer.send({ topic: this.env.EVENTS_TOPIC!, acks: -1, messages: envelopes.map((e) => ({ key: e.account_id, value: JSON.stringify(e) })) });
  }

  /** Produces envelopes one by one, keyed by account as the API does; returns where each landed. */
  async publish(envelopes: EventEnvelope[]): Promise<RecordMetadata[]> {
    await this.connected();
    const out: RecordMetadata[] = [];
    for (const e of envelopes) {
      const [meta] = await this.producer!.send({ topic: this.env.EVENTS_TOPIC!, acks: -1, messages: [{ key: e.account_id, value: JSON.stringify(e) }] });
      out.push(meta as RecordMetadata);
    }
    return out;
  }
}

export function envelope(accountId: string, type: EventType, data: Record<string, unknown> = {}, extra: Partial<EventEnvelope> = {}): EventEnvelope {
  return { id: 'evt_' + randomBytes(12).toString('hex'), account_id: accountId, type, created_at: new Date().toISOString(), data, ...extra };
}

export const newAccountId = (): string => 'acct_' + randomBytes(8).toString('hex');

export class TestDb {
  readonly client: MongoClient;
  private readonly box: SecretBox;

  constructor(private readonly env: Record<string, string>) {
    this.client = new MongoClient(env.MONGO_URL!, { serverSelectionTimeoutMS: 5000, retryWrites: false });
    this.box = new SecretBox(loadWebhookConfig(env, false).secretKey);
    atFileEnd(() => this.client.close());
  }

  get db() {
    return this.client.db(this.env.MONGO_DB!);
  }

  collection(name: 'webhooks' | 'deliveries' | 'delivery_attempts') {
    return this.db.collection<any>(name);
  }

  /**
   * A subscription as the API would store it, returned (like the API's create)
   * once its created_at, a fence ahead, has come (shared/src/subscription-fence.ts);
   * returns it with its plain secret.
   */
  async subscribe(accountId: string, url: string, events: string[], extra: Partial<WebhookDoc> = {}): Promise<WebhookDoc & { secret: string }> {
    const id = 'wh_' + randomBytes(12).toString('hex');
    const secret = newWebhookSecret();
    const doc: WebhookDoc = {
      _id: id,
      account_id: accountId,
      url,
      events,
      description: '',
      secret_enc: this.box.seal(secret, id),
      slot: Math.floor(Math.random() * 1e9),
      created_at: new Date(Date.now() + SUBSCRIPTION_FENCE_MS),
      last_status: null,
      last_delivery_at: null,
      last_error: null,
      ...extra,
    };
    await this.db.collection<WebhookDoc>('webhooks').insertOne(doc);
    await waitUntilTime(doc.created_at);
    return { ...doc, secret };
  }

  /**
   * Changes a subscription as a PATCH would: returns SUBSCRIPTION_FENCE_MS
   * after the change was stored (delivery processes see it from then on).
   * A re-enabling is `reenable`.
   */
  async change(id: string, set: Partial<WebhookDoc>): Promise<void> {
    await this.db.collection<WebhookDoc>('webhooks').updateOne({ _id: id }, { $set: set });
    await new Promise((r) => setTimeout(r, SUBSCRIPTION_FENCE_MS));
  }

  /** Enables a disabled subscription as PATCH enabled:true does: active from enabled_at, a fence ahead; returns once it has come. */
  async reenable(id: string): Promise<Date> {
    const enabledAt = new Date(Date.now() + SUBSCRIPTION_FENCE_MS);
    await this.db.collection<WebhookDoc>('webhooks').updateOne({ _id: id }, { $set: { enabled: true, enabled_at: enabledAt }, $unset: { disabled_reason: '', disabled_at: '' } });
    await waitUntilTime(enabledAt);
    return enabledAt;
  }

  /** Replaces a subscription's secret as a rotation would; returns the new plain secret. */
  async rotateSecret(id: string): Promise<string> {
    const secret = newWebhookSecret();
    await this.db.collection<WebhookDoc>('webhooks').updateOne({ _id: id }, { $set: { secret_enc: this.box.seal(secret, id) } });
    return secret;
  }

  /** The subscription with its last-attempt status (kept apart, in webhook_status) merged in, as the API shows it. */
  async webhook(id: string): Promise<WebhookDoc | null> {
    const doc = await this.db.collection<WebhookDoc>('webhooks').findOne({ _id: id });
    const status = await this.db.collection<{ _id: string; last_status: number | null; last_delivery_at: Date; last_error: string | null }>('webhook_status').findOne({ _id: id });
    if (!doc || !status) return doc;
    return { ...doc, last_status: status.last_status, last_delivery_at: status.last_delivery_at, last_error: status.last_error };
  }

  attempts(subscriptionId: string): Promise<any[]> {
    return this.collection('delivery_attempts').find({ subscription_id: subscriptionId }).sort({ at: 1 }).toArray();
  }

  /** Polls until `check` returns a truthy value. `what` names it in the timeout's message (a function: read when it times out, to say how far it got). */
  async until<T>(check: () => Promise<T | null | undefined | false>, timeoutMs = 20_000, what: string | (() => string | Promise<string>) = 'condition'): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const v = await check();
      if (v) return v;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${typeof what === 'function' ? await what() : what}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}
