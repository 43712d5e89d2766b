/**
 * The event log's moving parts in one API process: the producer, the
 * materializer (shared group), the fan-out (own group) and the waiters it
 * releases. Built with the deps, started by startApi before it listens.
 */
import { EventLog } from '#shared/eventlog/event-log.js';
import { topicCatalog, type Kafka } from '#shared/eventlog/kafka.js';
import { guardTopic, TopicMismatchError } from '#shared/eventlog/topic-guard.js';
import type { Lifecycle } from '#shared/lifecycle.js';
import type { Logger } from '#shared/log.js';
import type { ConsumerLag } from '#shared/metrics.js';
import type { Mongo } from '#shared/mongo/index.js';
import type { ApiConfig } from '../config.js';
import { FanOut, type FanOutOptions } from './fanout.js';
import { KafkaHeadSource, LogHead } from './log-head.js';
import type { FeedPorts } from './feed.js';
import { FETCH_FILL_BYTES, Materializer, type MaterializerOptions } from '../event-store/materializer.js';
import { readPartition, readRange } from '../event-store/store.js';
import { EventTraces } from '#shared/telemetry.js';
import { TailWindow, type TailRead } from './tail-window.js';
import { WaiterRegistry, type LiveEvent } from './waiters.js';
import { WatermarkReader } from '../event-store/watermarks.js';
import { PageCache } from '../event-store/page-cache.js';

export interface EventsRuntime {
  /** The producer of the event log (the logger is `deps.log`). */
  producer: EventLog;
  /** Checks the topic against what MongoDB recorded (partition count, topic id); see topic-guard.ts. */
  guard: () => Promise<void>;
  guardLog: Logger;
  registry: WaiterRegistry;
  watermarks: WatermarkReader;
  materializer: Materializer;
  /** Whether this process runs the materializer (MATERIALIZER_ENABLED); off, `materializer` is never started. */
  materializerEnabled: boolean;
  fanout: FanOut;
  /** Recent events per partition, kept by the fan-out (shared with it). */
  tail: TailWindow;
  /** Copies of full history pages and directories (immutable), shared by every history read of the process. */
  pageCache: PageCache;
  /** Each partition's end offset from Kafka, asked afresh: where a read must reach (log-head.ts). */
  head: LogHead;
  /** Recent events' trace contexts, noted by the fan-out: a read links to the traces of the events it returns. */
  traces: EventTraces;
  /** What a feed reads and registers with: one set for the process (its functions close over the runtime, not over a request). */
  feedPorts: FeedPorts;
}

/** Test hooks: options of the consumers (a hung stand-in, a short stall bound). */
export interface EventsRuntimeOverrides {
  fanout?: Partial<Pick<FanOutOptions, 'stallMs' | 'newConsumer' | 'tailSilenceMs' | 'wakeSlice' | 'dormantAfterMs'>>;
  materializer?: Partial<Pick<MaterializerOptions, 'stallMs' | 'newConsumer' | 'retentionMs' | 'sweepIntervalMs' | 'retentionGraceMs'>>;
}

export function createEventsRuntime(
  config: ApiConfig,
  logger: Logger,
  kafka: Kafka,
  mongo: Mongo,
  lag?: ConsumerLag,
  overrides: EventsRuntimeOverrides = {},
  onDeadLetter?: (partition: number) => void,
): EventsRuntime {
  const topic = config.kafka.eventsTopic;
  const registry = new WaiterRegistry();
  const watermarks = WatermarkReader.forCollection(mongo.collections.watermarks, topic);
  const producer = new EventLog(kafka, topicCatalog(config).events, logger, {
    lingerMs: config.events.producerLingerMs,
    produceTimeoutMs: config.events.produceTimeoutMs,
    maxBatchMessages: 1000,
    maxBatchBytes: 900 * 1024,
  });
  const materializer = new Materializer({
    kafka,
    events: mongo.collections.events,
    watermarks: mongo.collections.watermarks,
    pages: mongo.collections.eventPages,
    topic,
    groupId: config.events.materializerGroupId,
    chunkSize: config.events.materializerChunkEvents,
    ...(config.events.materializerFetchWaitMs > 0 ? { fetchFill: { minBytes: FETCH_FILL_BYTES, maxWaitMs: config.events.materializerFetchWaitMs } } : {}),
    log: logger.child({ component: 'materializer' }),
    onWatermark: (partition, offset) => watermarks.note(partition, offset),
    topicId: () => topicChecked,
    deadEvents: mongo.collections.deadEvents,
    onDeadLetter,
    lag,
    retentionMs: config.kafka.eventsRetentionMs,
    ...overrides.materializer,
  });
  const tail = new TailWindow({ events: config.events.tailWindowEvents, bytes: config.events.tailWindowBytes });
  const traces = new EventTraces();
  const fanout = new FanOut({
    kafka,
    traces,
    tail,
    topic,
    groupPrefix: config.events.fanoutGroupPrefix,
    instanceId: config.instanceId,
    registry,
    log: logger.child({ component: 'fanout' }),
    lag,
    dormantAfterMs: config.events.fanoutDormantMs,
    history: {
      waitForWatermark: (partition, offset, timeoutMs) => watermarks.waitFor(partition, offset, timeoutMs),
      readPartition: (partition, from, before, limit) => readPartition(mongo.collections.events, mongo.collections.eventPages, partition, from, before, limit, pageCache),
    },
    ...overrides.fanout,
  });
  // Set once the topic is checked: until then the materializer writes no watermark (see guardTopic).
  let topicChecked: string | null = null;
  const guardLog = logger.child({ component: 'topic-guard' });
  const guard = async (): Promise<void> => {
    await guardTopic(mongo.collections, { topic, partitions: producer.partitionCount, topicId: producer.topicId }, guardLog);
    topicChecked = producer.topicId;
  };
  const pageCache = new PageCache(config.events.historyCacheBytes);
  const headSource = new KafkaHeadSource(kafka, topic, config.events.handoffTimeoutMs);
  const head = new LogHead(() => headSource.fetch(), () => headSource.close());
  const parts = { producer, guard, guardLog, registry, watermarks, materializer, materializerEnabled: config.events.materializerEnabled, fanout, tail, pageCache, head, traces };
  return { ...parts, feedPorts: newFeedPorts(parts, mongo, config.events.handoffTimeoutMs) };
}

/**
 * Producer first (it creates the topic), then the topic check, then both
 * consumers. The fan-out's positions are pinned once `start` resolves, so
 * waiters may be served. A topic with another partition count than recorded
 * refuses the start (TopicMismatchError). MongoDB unreachable at boot: the
 * check goes on in the background while the process serves what it can (the
 * materializer writes nothing until it has passed); finding a mismatch then
 * stops the producer and the materializer.
 */
export async function startEventsRuntime(events: EventsRuntime, lifecycle: Lifecycle): Promise<void> {
  const logger = events.guardLog;
  await events.producer.start();
  lifecycle.onStop('event-log producer', () => events.producer.stop());
  try {
    await events.guard();
  } catch (err) {
    if (err instanceof TopicMismatchError) {
      await events.producer.stop().catch(() => undefined);
      throw err;
    }
    logger.warn({ err }, 'could not check the event topic against MongoDB yet; retrying in the background');
    const timer = setInterval(() => {
      events.guard().then(
        () => clearInterval(timer),
        (again: unknown) => {
          if (!(again instanceof TopicMismatchError)) return;
          clearInterval(timer);
          logger.fatal({ err: again }, 'the event topic does not match this deployment; stopping the producer and the materializer');
          void events.producer.stop();
          void events.materializer.stop();
        },
      );
    }, 5000);
    timer.unref();
    lifecycle.onStop('topic-guard retry', () => clearInterval(timer));
  }
  if (events.materializerEnabled) lifecycle.onStop('materializer', () => events.materializer.stop());
  else logger.info('the materializer is off in this process (MATERIALIZER_ENABLED=false): other API processes write history');
  lifecycle.onStop('fan-out', () => events.fanout.stop());
  lifecycle.onStop('log head', () => events.head.close());
  await Promise.all([events.materializerEnabled ? events.materializer.start() : undefined, events.fanout.start()]);
}

/** The range from the tail window, or null when it cannot vouch for it (not covered, or the fan-out has gone silent). */
export function readTail(events: Pick<EventsRuntime, 'fanout' | 'tail'>, query: TailRead): LiveEvent[] | null {
  if (!events.fanout.tailUsable()) {
    if (events.tail.enabled) events.tail.misses += 1;
    return null;
  }
  return events.tail.read(query);
}

function newFeedPorts(events: Omit<EventsRuntime, 'feedPorts'>, mongo: Mongo, handoffTimeoutMs: number): FeedPorts {
  return {
    registry: events.registry,
    position: (partition) => events.fanout.position(partition),
    partitionOf: (accountId) => events.producer.partitionOf(accountId),
    waitForWatermark: (partition, offset, timeoutMs) => events.watermarks.waitFor(partition, offset, timeoutMs),
    readRange: (query) => readRange(mongo.collections.eventPages, query, events.pageCache),
    readWindow: (query) => readTail(events, query),
    windowCovers: (partition, after, before) => events.fanout.tailUsable() && events.tail.covers(partition, after, before),
    nothingAfter: (partition, accountId, after) => events.fanout.recent.nothingAfter(partition, accountId, after),
    handoffTimeoutMs,
    awake: () => events.fanout.awake(),
  };
}
