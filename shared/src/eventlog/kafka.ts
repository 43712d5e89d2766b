/**
 * The only module that imports kafkajs. Everything else gets a Kafka handle
 * from here and names topics through the catalog below.
 */
import { Kafka, Partitioners, logLevel, type Admin, type Consumer, type KafkaConfig, type LogEntry, type Producer } from 'kafkajs';
import type { BaseConfig } from '../config/index.js';
import type { Logger } from '../log.js';

export type { Admin, Consumer, EachBatchPayload, Kafka, Producer, KafkaMessage, RecordMetadata } from 'kafkajs';

export interface TopicSpec {
  name: string;
  partitions: number;
  /** Set when the topic is created; null: the brokers' defaults. */
  replicationFactor: number | null;
  minInsyncReplicas: number | null;
  /** What a message on the topic is. */
  schema: 'EventEnvelope (JSON), key = account_id';
  /** The brokers holding it (for requests kafkajs cannot make, see topic-id.ts). */
  brokers: string[];
  /** Least time the log keeps a record (retention.ms): the history's retention and a day more. */
  retentionMs?: number;
}

/** Every topic the service uses. */
export function topicCatalog(config: BaseConfig): { events: TopicSpec } {
  return {
    events: {
      name: config.kafka.eventsTopic,
      partitions: config.kafka.eventsPartitions,
      replicationFactor: config.kafka.eventsReplicationFactor,
      minInsyncReplicas: config.kafka.eventsMinInsyncReplicas,
      schema: 'EventEnvelope (JSON), key = account_id',
      brokers: config.kafka.brokers,
      retentionMs: config.kafka.eventsRetentionMs + LOG_MARGIN_MS,
    },
  };
}

/** How much longer than history the log keeps events: a materializer a day behind still finds them. */
const LOG_MARGIN_MS = 24 * 3600 * 1000;

const LEVELS: Record<number, 'error' | 'warn' | 'info' | 'debug'> = {
  [logLevel.ERROR]: 'error',
  [logLevel.WARN]: 'warn',
  [logLevel.INFO]: 'info',
  [logLevel.DEBUG]: 'debug',
};

/**
 * kafkajs warnings that describe a choice we made, with why. Each is logged once per process at
 * info, with the reason, and at debug after that (a replaced producer would repeat it).
 */
const EXPLAINED: Record<string, string> = {
  'Limiting retries for the idempotent producer may invalidate EoS guarantees':
    'retries are bounded on purpose: ingest answers 503 within PRODUCE_TIMEOUT_MS instead of hanging, a failed send replaces the producer, and an event Kafka then holds twice is read once (history keeps one copy of an id); see docs/operations.md',
};

/** Routes kafkajs's log entries to our logger (exported for its test). */
export function kafkaLogSink(log: Logger): (entry: LogEntry) => void {
  const explained = new Set<string>();
  return ({ level, log: entry }: LogEntry) => {
    const { message, ...rest } = entry;
    const why = EXPLAINED[message];
    if (why !== undefined) {
      if (explained.has(message)) log.debug(rest, message);
      else log.info({ ...rest, why }, message);
      explained.add(message);
      return;
    }
    log[LEVELS[level] ?? 'info'](rest, message);
  };
}

export function createKafka(config: BaseConfig, logger: Logger, overrides: Partial<KafkaConfig> = {}): Kafka {
  const sink = kafkaLogSink(logger.child({ component: 'kafka' }));
  return new Kafka({
    clientId: config.kafka.clientId,
    brokers: config.kafka.brokers,
    connectionTimeout: 3000,
    requestTimeout: 10000,
    retry: { initialRetryTime: 100, retries: 5 },
    logLevel: logLevel.WARN,
    logCreator: () => sink,
    ...overrides,
  });
}

/** An idempotent producer: acks from all in-sync replicas, no duplicates on retry. */
export function createProducer(kafka: Kafka): Producer {
  return kafka.producer({
    idempotent: true,
    maxInFlightRequests: 1,
    createPartitioner: Partitioners.DefaultPartitioner,
    allowAutoTopicCreation: false,
  });
}

/**
 * How full a fetch should be before the broker answers it: at least `minBytes`
 * of messages, or whatever there is after `maxWaitMs`. The default (absent)
 * answers as soon as one message is there, which is what live readers want; a
 * writer that pays per batch (the materializer) trades a bounded wait for
 * fewer, fuller batches.
 */
export interface FetchFill {
  minBytes: number;
  maxWaitMs: number;
}

export function createConsumer(kafka: Kafka, groupId: string, opts: { sessionTimeout?: number; fetch?: FetchFill } = {}): Consumer {
  return kafka.consumer({
    groupId,
    allowAutoTopicCreation: false,
    sessionTimeout: opts.sessionTimeout ?? 10000,
    heartbeatInterval: 1000,
    rebalanceTimeout: 15000,
    maxWaitTimeInMs: opts.fetch?.maxWaitMs ?? 100,
    ...(opts.fetch ? { minBytes: opts.fetch.minBytes } : {}),
    retry: { retries: 10, initialRetryTime: 200 },
  });
}

/**
 * Creates the topic when missing, with the spec's partition count, replication
 * factor and min.insync.replicas. None of them is changed on an existing topic
 * (cursors and account placement depend on the count; replication is the
 * operator's, with kafka-reassign-partitions and kafka-configs): a difference
 * is logged at startup.
 */
export async function ensureTopic(admin: Admin, spec: TopicSpec, logger: Logger): Promise<void> {
  const existing = await admin.listTopics();
  if (!existing.includes(spec.name)) {
    // Another process may create it at the same moment (two replicas booting on a fresh
    // cluster): kafkajs then answers false, and the topic is used as that process made it.
    // The leaders are waited for below, not by kafkajs: on a cluster of several brokers its
    // wait asks any broker, and one that has not yet heard of the new topic answers
    // UNKNOWN_TOPIC_OR_PARTITION, which kafkajs's wait does not retry (a process failed to start).
    const created = await admin.createTopics({
      waitForLeaders: false,
      topics: [
        {
          topic: spec.name,
          numPartitions: spec.partitions,
          ...(spec.replicationFactor !== null ? { replicationFactor: spec.replicationFactor } : {}),
          configEntries: [
            ...(spec.retentionMs ? [{ name: 'retention.ms', value: String(spec.retentionMs) }] : []),
            ...(spec.minInsyncReplicas !== null ? [{ name: 'min.insync.replicas', value: String(spec.minInsyncReplicas) }] : []),
          ],
        },
      ],
    });
    if (created) {
      await waitForLeaders(admin, spec.name);
      logger.info({ topic: spec.name, partitions: spec.partitions, replicationFactor: spec.replicationFactor, minInsyncReplicas: spec.minInsyncReplicas }, 'created topic');
      return;
    }
  }
  const { count, replicas } = await waitForLeaders(admin, spec.name);
  if (count !== spec.partitions) {
    logger.warn({ topic: spec.name, configured: spec.partitions, actual: count }, 'topic partition count differs from EVENTS_PARTITIONS; using the topic as it is');
  }
  if (spec.replicationFactor !== null && replicas !== spec.replicationFactor) {
    logger.warn({ topic: spec.name, configured: spec.replicationFactor, actual: replicas }, 'topic replication factor differs from EVENTS_REPLICATION_FACTOR; using the topic as it is');
  }
  if (spec.minInsyncReplicas !== null) {
    const actual = await topicConfig(admin, spec.name, 'min.insync.replicas');
    if (actual !== String(spec.minInsyncReplicas)) {
      logger.warn({ topic: spec.name, configured: spec.minInsyncReplicas, actual }, 'topic min.insync.replicas differs from EVENTS_MIN_INSYNC_REPLICAS; using the topic as it is');
    }
  }
  if (spec.retentionMs) await checkRetention(admin, spec, logger);
}

/** kafkajs's ConfigResourceTypes.TOPIC: that enum is not a named export Node can import from the CommonJS module. */
const TOPIC_RESOURCE = 2;

/** A topic's effective value of one setting (its own, else the broker's), as the broker reports it. */
export async function topicConfig(admin: Admin, topic: string, name: string): Promise<string | null> {
  const described = await admin.describeConfigs({ includeSynonyms: false, resources: [{ type: TOPIC_RESOURCE, name: topic, configNames: [name] }] });
  return described.resources[0]?.configEntries.find((e) => e.configName === name)?.configValue ?? null;
}

/**
 * An existing topic keeping its log for less than history needs is reported,
 * not changed (the operator owns the topic's settings): history older than
 * the log's retention cannot be rebuilt from the log.
 */
async function checkRetention(admin: Admin, spec: TopicSpec, logger: Logger): Promise<void> {
  try {
    const value = Number(await topicConfig(admin, spec.name, 'retention.ms'));
    if (value >= 0 && value < (spec.retentionMs ?? 0)) {
      logger.warn({ topic: spec.name, retentionMs: value, needed: spec.retentionMs }, 'the event topic keeps its log for less than EVENT_RETENTION_DAYS and a day; raise its retention.ms (kafka-configs --alter)');
    }
  } catch (err) {
    logger.warn({ err, topic: spec.name }, 'could not read the event topic retention.ms');
  }
}

/**
 * Waits until every partition of a topic has a leader (a topic just created by
 * another process may not have them yet, and offset requests would fail with
 * NOT_LEADER_FOR_PARTITION); returns the partition count and the fewest
 * replicas any partition has.
 */
async function waitForLeaders(admin: Admin, topic: string, timeoutMs = 30_000): Promise<{ count: number; replicas: number }> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const meta = await admin.fetchTopicMetadata({ topics: [topic] });
      const partitions = meta.topics[0]?.partitions ?? [];
      if (partitions.length > 0 && partitions.every((p) => p.leader >= 0 && p.partitionErrorCode === 0)) {
        return { count: partitions.length, replicas: Math.min(...partitions.map((p) => p.replicas.length)) };
      }
    } catch (err) {
      // A topic another process has just created can be unknown to the broker's metadata
      // for a moment (UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE): retriable, as kafkajs marks them.
      if (!(err as { retriable?: boolean }).retriable || Date.now() > deadline) throw err;
    }
    if (Date.now() > deadline) throw new Error(`topic ${topic} has partitions without a leader after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/**
 * The partition an account's events go to: kafkajs's DefaultPartitioner
 * (murmur2 of the key, Java client compatible), computed here so the producer
 * can name the partition explicitly and know each event's position.
 */
export function partitionForKey(key: string, partitionCount: number): number {
  return defaultPartitioner({ topic: '', partitionMetadata: metadataFor(partitionCount), message: { key, value: null } });
}

const defaultPartitioner = Partitioners.DefaultPartitioner();

/** The partitioner reads the list, never changes it: one per partition count (built per event, it cost ~4 µs each). */
const metadataByCount = new Map<number, { partitionId: number; partitionErrorCode: number; leader: number; replicas: number[]; isr: number[] }[]>();

function metadataFor(partitionCount: number) {
  let metadata = metadataByCount.get(partitionCount);
  if (!metadata) {
    metadata = Array.from({ length: partitionCount }, (_, partitionId) => ({ partitionId, partitionErrorCode: 0, leader: 0, replicas: [0], isr: [0] }));
    metadataByCount.set(partitionCount, metadata);
  }
  return metadata;
}

/** The next offset to be written in each partition (the high watermark). */
export async function endOffsets(admin: Admin, topic: string, timeoutMs = 30_000): Promise<Map<number, bigint>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const offsets = await admin.fetchTopicOffsets(topic);
      return new Map(offsets.map((o) => [o.partition, BigInt(o.high)]));
    } catch (err) {
      // Right after a topic is created the broker can name a leader in its metadata
      // before that leader answers offset requests (NOT_LEADER_FOR_PARTITION): retriable.
      if (!(err as { retriable?: boolean }).retriable || Date.now() > deadline) throw err;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
}

/**
 * Reads the partition count of a topic as it exists on the broker, once every
 * partition has a leader (retrying while a just-created topic is still unknown
 * to the broker's metadata: two processes booting together on a fresh cluster).
 */
export async function partitionCount(admin: Admin, topic: string, timeoutMs = 30_000): Promise<number> {
  return (await waitForLeaders(admin, topic, timeoutMs)).count;
}
