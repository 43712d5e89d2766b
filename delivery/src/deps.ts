import { createConsumer, createKafka, topicCatalog, type Consumer, type Kafka } from '#shared/eventlog/kafka.js';
import { Lifecycle } from '#shared/lifecycle.js';
import { createLogger, type Logger } from '#shared/log.js';
import { conditionalWritesAreAtomic, createMongo, type Mongo } from '#shared/mongo/index.js';
import { DueWriteOrder } from '#shared/mongo/delivery-queue.js';
import { SecretBox } from '#shared/secrets.js';
import { DnsResolver } from '#shared/dns.js';
import type { Resolver } from '#shared/url-safety.js';
import { ATTEMPT_TIMEOUT_MS, type DeliveryConfig } from './config.js';
import type { DeliveryCollections } from './deliveries.js';
import type { DispatchHooks } from './run-job.js';
import { EndpointHealth } from './endpoint-health.js';
import { Notifications, type DisabledSubscription } from './notifications.js';
import { EventLog } from '#shared/eventlog/event-log.js';
import { createSender, type Sender } from './http-sender.js';
import { createDeliveryMetrics, type DeliveryMetrics } from './metrics.js';
import { collectionSource, SubscriptionTable } from './subscription-table.js';

export const USER_AGENT = 'event-platform-webhooks/1.0';

/**
 * Everything the delivery process's parts use, built once per process (or
 * per test worker). Plain object, no container: tests pass overrides. Nothing
 * here reads or writes a store or the network when built: startDelivery
 * (worker.ts) starts what runs, in its order.
 */
export interface DeliveryDeps {
  config: DeliveryConfig;
  log: Logger;
  /** Stops registered here run in reverse: the ones below close after every part worker.ts adds. */
  lifecycle: Lifecycle;
  mongo: Mongo;
  /** The store's collections, and whether a conditional update is atomic on this server (deliveries.ts). */
  collections: DeliveryCollections;
  kafka: Kafka;
  /** Makes each consumer the supervised one runs (a silent one is replaced). */
  newConsumer: () => Consumer;
  clock: () => Date;
  /** HTTP to receivers: the address policy, DNS through `resolve`, one pool per (subscription, origin). */
  sender: Sender;
  /** Opens webhook signing secrets sealed at rest. */
  secretBox: SecretBox;
  /** Every subscription in memory (subscription-table.ts); started by startDelivery. */
  table: SubscriptionTable;
  /** Prometheus metrics of this process (its own registry). */
  metrics: DeliveryMetrics;
  /** The producer of the operational notifications (started by startDelivery). */
  eventLog: EventLog;
  /** Writes webhook.disabled and webhook.delivery_exhausted to the account's log. */
  notifications: Notifications;
  /** Disables an endpoint failing past WEBHOOK_DISABLE_AFTER; absent when that is off. */
  health: EndpointHealth | undefined;
  /** Test hooks of the dispatcher (force rare timings). */
  hooks: DispatchHooks | undefined;
  /** A consumer silent this long is replaced (undefined: the supervisor's default). */
  stallMs: number | undefined;
}

export interface DeliveryOverrides {
  log?: Logger;
  /** DNS for receiver names; tests inject a fake to play DNS rebinding. */
  resolve?: Resolver;
  /** A consumer silent this long is replaced (default 60 s). */
  stallMs?: number;
  /** Makes the consumers (tests stand in a hung one). */
  newConsumer?: (kafka: Kafka, groupId: string) => Consumer;
  /** Test hooks of the dispatcher (force rare timings). */
  hooks?: DispatchHooks;
}

export function createDeps(config: DeliveryConfig, overrides: DeliveryOverrides = {}): DeliveryDeps {
  const log = overrides.log ?? createLogger('delivery', config.logLevel).child({ instance: config.instanceId });
  const lifecycle = new Lifecycle(log);
  const mongo = createMongo(config, { log });
  lifecycle.onStop('mongo', () => mongo.close());
  const kafka = createKafka(config, log);
  const wh = config.webhooks;
  // c-ares, not dns.lookup: a slow DNS server must not hold the threadpool (shared/src/dns.ts).
  const dns = new DnsResolver(wh.dns);
  lifecycle.onStop('dns', () => dns.close());
  const sender = createSender({
    policy: { allowPrivate: wh.allowPrivateTargets, allowedPorts: wh.allowedPorts },
    resolve: overrides.resolve ?? dns.resolve,
    caPem: wh.caPem,
    timeoutMs: ATTEMPT_TIMEOUT_MS,
    userAgent: USER_AGENT,
    socketsPerOrigin: wh.socketsPerOrigin,
  });
  lifecycle.onStop('sender', () => sender.close());
  const clock = (): Date => new Date();
  // Every subscription in memory, reloaded every 250 ms: matching and the pre-send read skip the
  // store while it is fresh enough (subscription-table.ts). Stopped after the dispatcher.
  const table = new SubscriptionTable(collectionSource(mongo.collections.webhooks), log.child({ component: 'subscription-table' }));
  lifecycle.onStop('subscription-table', () => table.stop());
  const metrics = createDeliveryMetrics();
  // Operational notifications (webhook.disabled, webhook.delivery_exhausted) go to the account's log through
  // the producer the API uses (notifications.ts); startDelivery starts it and stops it after the dispatcher.
  const eventLog = new EventLog(kafka, topicCatalog(config).events, log.child({ component: 'notifications' }));
  const notifications = new Notifications((envelopes) => eventLog.publish(envelopes), mongo.collections.webhooks, clock, log.child({ component: 'notifications' }), table);
  const onDisabled = (sub: DisabledSubscription): void => {
    metrics.endpointsDisabled.inc();
    notifications.subscriptionDisabled(sub).catch((err: unknown) => log.warn({ err, subscription: sub._id }, 'could not write the webhook.disabled notification'));
  };
  const newConsumer = overrides.newConsumer ?? createConsumer;
  return {
    config,
    log,
    lifecycle,
    mongo,
    // Check-then-writes on deliveries are one conditional update where the server makes that atomic (deliveries.ts).
    collections: { ...mongo.collections, dueWrites: new DueWriteOrder(), conditionalWritesAreAtomic: () => conditionalWritesAreAtomic(mongo.db) },
    kafka,
    newConsumer: () => newConsumer(kafka, config.groupId),
    clock,
    sender,
    secretBox: new SecretBox(wh.secretKey),
    table,
    metrics,
    eventLog,
    notifications,
    health: wh.disableAfterMs === null ? undefined : new EndpointHealth(mongo.collections, wh.disableAfterMs, clock, log, onDisabled),
    hooks: overrides.hooks,
    stallMs: overrides.stallMs,
  };
}
