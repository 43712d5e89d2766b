import { channel } from 'node:diagnostics_channel';
import type { Admin } from 'kafkajs';
import { endOffsets, ensureTopic, topicCatalog, type Consumer } from '#shared/eventlog/kafka.js';
import { SupervisedConsumer } from '#shared/eventlog/supervised-consumer.js';
import { guardTopic, topicFacts } from '#shared/eventlog/topic-guard.js';
import type { Logger } from '#shared/log.js';
import { ensureIndexes, type Mongo } from '#shared/mongo/index.js';
import { ATTEMPT_TIMEOUT_MS, type DeliveryConfig } from './config.js';
import { eachBatchHandler } from './consumer.js';
import { createDeps, type DeliveryDeps, type DeliveryOverrides } from './deps.js';
import { mongoProgressStore, OffsetTracker } from './offsets.js';
import { countQueue, type AttemptRecord } from './deliveries.js';
import { Dispatcher } from './dispatch.js';
import { countDisabled } from './endpoint-health.js';
import { countAttempt, countGivenUp, startMetricsServer, startQueueSampler, type DeliveryMetrics } from './metrics.js';
import { startSweeper } from './retention.js';
import { RetryScheduler } from './retry-scheduler.js';
import { traceAttempt } from './tracing.js';

export interface RunningDelivery {
  /** What the parts below were built from (deps.ts). */
  deps: DeliveryDeps;
  log: Logger;
  mongo: Mongo;
  /** The delivery consumer under its watchdog (replaced when silent past its bound). */
  consumer: SupervisedConsumer;
  dispatcher: Dispatcher;
  scheduler: RetryScheduler;
  metrics: DeliveryMetrics;
  /** Where GET /metrics answers; null with METRICS_PORT=0. */
  metricsUrl: string | null;
  close(): Promise<void>;
}

/** Per shutdown step: the dispatcher's may take an attempt's 4 s and then its records' flush. */
const STOP_STEP_MS = 15_000;

/**
 * The whole shutdown, inside docker-compose.yml's `stop_grace_period` for
 * the delivery service (30 s): the consumer leaves its group, attempts in
 * flight finish (≤ 5 s), their records are written (≤ 8 s), the rest closes.
 */
export const DELIVERY_SHUTDOWN_MS = 25_000;

/**
 * A group that has never committed an offset starts at the end of the log
 * (unless DELIVERY_START_FROM=earliest): its committed offsets are set to
 * each partition's end before the first member joins. A group with any
 * committed offset resumes where it was, and a partition it never consumed
 * is read from its beginning (nothing acknowledged there is skipped).
 */
export async function placeNewGroup(admin: Admin, groupId: string, topic: string, startFrom: 'latest' | 'earliest', log: Logger): Promise<void> {
  if (startFrom === 'earliest') return;
  // A broker that has just started may not have a group coordinator yet (NOT_COORDINATOR): ask again.
  let committed: Awaited<ReturnType<Admin['fetchOffsets']>>[number] | undefined;
  for (let tries = 1; ; tries++) {
    try {
      [committed] = await admin.fetchOffsets({ groupId, topics: [topic] });
      break;
    } catch (err) {
      if (tries >= 60) throw err;
      await new Promise((r) => setTimeout(r, 500));
    }
  }
  if (committed && committed.partitions.some((p) => p.offset !== '-1')) return;
  // Retried while a just-created topic's leaders do not answer offset requests yet (NOT_LEADER_FOR_PARTITION).
  const ends = [...(await endOffsets(admin, topic)).entries()].map(([partition, high]) => ({ partition, offset: String(high) }));
  try {
    await admin.setOffsets({ groupId, topic, partitions: ends });
    log.info({ group: groupId, offsets: ends.map((p) => p.offset) }, 'new delivery group starts at the end of the log (DELIVERY_START_FROM=latest)');
  } catch (err) {
    // Another process of a fresh deployment joined first and is placing the group itself.
    log.info({ err, group: groupId }, 'could not place the new delivery group; another member is already in it');
  }
}

/** Every MongoDB command the delivery process starts (`{ command }`), when the driver's command monitor is on. */
const STORE_OPS = channel('event-platform.delivery.store-op');

/** How often each partition's finished offset is committed (also after every step of a batch). */
const COMMIT_INTERVAL_MS = 200;

/**
 * Boots the delivery process: joins its consumer group on the events topic,
 * turns events into delivery records, sends them, and retries from MongoDB.
 */
export async function startDelivery(config: DeliveryConfig, overrides: DeliveryOverrides = {}): Promise<RunningDelivery> {
  const deps = createDeps(config, overrides);
  const { log, lifecycle, mongo, kafka, metrics } = deps;
  // Store operations, told to whoever listens (the bench's probe counts them per delivery);
  // the driver reports them only while its command monitor is on (MONGO_SLOW_MS > 0).
  mongo.client.on('commandStarted', (e) => {
    if (STORE_OPS.hasSubscribers) STORE_OPS.publish({ command: e.commandName });
  });
  await ensureIndexes(mongo, log);

  const admin = kafka.admin();
  await admin.connect();
  try {
    await ensureTopic(admin, topicCatalog(config).events, log);
    // Refuses a topic whose partition count differs from the one recorded on first start (TopicMismatchError).
    await guardTopic(mongo.collections, await topicFacts(admin, topicCatalog(config).events), log.child({ component: 'topic-guard' }));
    await placeNewGroup(admin, config.groupId, config.kafka.eventsTopic, config.startFrom, log);
  } finally {
    await admin.disconnect();
  }

  deps.table.start();
  await deps.eventLog.start();
  lifecycle.onStop('notifications producer', () => deps.eventLog.stop());
  const { dispatcher, scheduler } = startPipeline(deps);
  startSamplers(deps, dispatcher);
  const consumer = await startIntake(deps, dispatcher);

  let metricsUrl: string | null = null;
  if (config.metrics.port !== 0) {
    const server = await startMetricsServer({ registry: metrics.registry, host: config.metrics.host, port: config.metrics.port, token: config.metrics.token, log, ready: () => consumer.health().alive });
    lifecycle.onStop('metrics server', () => server.close());
    metricsUrl = server.url;
  }
  log.info({ group: config.groupId, concurrency: config.webhooks.concurrency, retries: config.webhooks.retrySchedule.length }, 'delivery worker started');
  return { deps, log, mongo, consumer, dispatcher, scheduler, metrics, metricsUrl, close: () => lifecycle.stop(STOP_STEP_MS, DELIVERY_SHUTDOWN_MS) };
}

/** What the dispatcher, the retry scheduler and the consumer share. */
function sharedParts(deps: DeliveryDeps) {
  const wh = deps.config.webhooks;
  return { log: deps.log, collections: deps.collections, owner: deps.config.instanceId, leaseMs: wh.leaseMs, clock: deps.clock, table: deps.table };
}

/** The dispatcher (admission → attempt → record) and the retry scheduler that feeds it from the store. */
function startPipeline(deps: DeliveryDeps): { dispatcher: Dispatcher; scheduler: RetryScheduler } {
  const { lifecycle, metrics } = deps;
  const wh = deps.config.webhooks;
  const shared = sharedParts(deps);
  const onAttempt = (attempt: AttemptRecord): void => {
    countAttempt(metrics, attempt);
    traceAttempt(attempt);
  };
  const dispatcher = new Dispatcher(
    { ...shared, sender: deps.sender, box: deps.secretBox, retrySchedule: wh.retrySchedule, onAttempt, onGivenUpDisabled: () => countGivenUp(metrics, 'subscription_disabled'), onGivenUp: (attempt) => deps.notifications.givenUp(attempt), health: deps.health, hooks: deps.hooks },
    { concurrency: wh.concurrency, perSubscription: wh.concurrencyPerSubscription },
  );
  // Stopped after the consumer (hooks run in reverse): attempts in flight finish and their
  // records are written (the recorder flushes before exit), queued ones are handed back.
  lifecycle.onStop('dispatcher', () => dispatcher.stop(ATTEMPT_TIMEOUT_MS + 1000));

  const scheduler = new RetryScheduler({ ...shared, dispatcher, intervalMs: wh.pollIntervalMs });
  // An ordered queue goes on as soon as its head is finished here, or its deliveries are appended here.
  dispatcher.onFifoReady = (subscriptionId) => scheduler.fifo.poke(subscriptionId);
  scheduler.start();
  lifecycle.onStop('retry-scheduler', () => scheduler.stop());
  return { dispatcher, scheduler };
}

/** The in-flight gauge, the queue sampler and the retention sweeper. */
function startSamplers(deps: DeliveryDeps, dispatcher: Dispatcher): void {
  const { lifecycle, metrics, collections, clock, log, config } = deps;
  metrics.watchInFlight(() => dispatcher.inFlight);
  const countAll = async () => {
    const [queue, disabled] = await Promise.all([countQueue(collections, clock()), countDisabled(collections)]);
    return { ...queue, disabled };
  };
  const stopSampler = startQueueSampler(metrics, countAll, config.metrics.sampleIntervalMs, log);
  lifecycle.onStop('queue-sampler', stopSampler);

  const stopSweeper = startSweeper({ collections, log, retentionMs: config.webhooks.retentionMs, intervalMs: 10 * 60_000, clock });
  lifecycle.onStop('retention-sweeper', stopSweeper);
}

/** Intake: the supervised consumer, its offsets (committed here, not by kafkajs) and the drain at shutdown. */
async function startIntake(deps: DeliveryDeps, dispatcher: Dispatcher): Promise<SupervisedConsumer> {
  const { config, log, lifecycle, mongo, metrics } = deps;
  const shared = sharedParts(deps);
  // Offsets are committed here, not by kafkajs: up to each partition's lowest unfinished delivery.
  let current: { consumer: Consumer; offsets: OffsetTracker } | null = null;
  const progressStore = mongoProgressStore(mongo.collections.deliveryProgress);
  const commitNow = async (): Promise<void> => {
    const at = current;
    if (!at) return;
    await at.offsets.commit(at.consumer);
    await at.offsets.writeProgress();
  };
  const committer = setInterval(() => {
    commitNow().catch((err: unknown) => log.debug({ err }, 'could not commit delivery offsets; will try again'));
  }, COMMIT_INTERVAL_MS);
  committer.unref();
  const consumer = new SupervisedConsumer({
    name: 'delivery',
    groupId: config.groupId,
    log,
    stallMs: deps.stallMs,
    newConsumer: deps.newConsumer,
    run: async (c) => {
      const offsets = new OffsetTracker(config.kafka.eventsTopic, { store: progressStore, group: config.groupId, log });
      current = { consumer: c, offsets };
      // A new generation re-reads each partition from its committed offset: what the old one
      // tracked no longer commits (its deliveries still finish; a copy read again waits for them).
      c.on(c.events.GROUP_JOIN, () => offsets.reset());
      await c.connect();
      await c.subscribe({ topic: config.kafka.eventsTopic, fromBeginning: true });
      await c.run({
        eachBatchAutoResolve: false,
        autoCommit: false,
        partitionsConsumedConcurrently: 4,
        eachBatch: metrics.consumerLag.track(
          'delivery',
          c,
          config.kafka.eventsTopic,
          eachBatchHandler({ ...shared, dispatcher, offsets: { of: (p) => offsets.of(p), resume: (p, first) => offsets.resume(p, first), get unfinished() { return offsets.unfinished; }, commit: () => offsets.commit(c) } }),
        ),
      });
    },
  });
  await consumer.start();
  lifecycle.onStop('consumer', async () => {
    clearInterval(committer);
    await consumer.stop();
  });
  // Runs before the consumer leaves its group: no new batches, the dispatcher finishes what it
  // holds (queued fresh deliveries go to the store), then the offsets are committed, so a
  // clean restart sends again only what is in the store.
  lifecycle.onStop('drain', async () => {
    const c = consumer.consumer;
    try {
      c?.pause([{ topic: config.kafka.eventsTopic }]);
    } catch {
      // not running: nothing to pause
    }
    await dispatcher.stop(ATTEMPT_TIMEOUT_MS + 1000);
    await commitNow().catch((err: unknown) => log.info({ err }, 'could not commit the last delivery offsets; the next owner sends them again'));
  });
  return consumer;
}
