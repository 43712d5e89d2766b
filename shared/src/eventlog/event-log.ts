/**
 * The producer side of the event log. `publish` returns once Kafka has
 * acknowledged every event (idempotent producer, acks from all in-sync
 * replicas) and tells where each one landed. Concurrent publishes share sends.
 */
import type { Position } from '../cursor.js';
import { AppError, unavailable } from '../errors/index.js';
import { isDependencyError } from '../errors/dependency.js';
import type { Logger } from '../log.js';
import { traceparentOf, tracer, tracingOn } from '../telemetry.js';
import { SpanKind, SpanStatusCode, trace, context } from '@opentelemetry/api';
import { Batcher, BatchTimeoutError } from './batcher.js';
import { encodeEnvelope } from './envelope.js';
import { createProducer, ensureTopic, partitionCount, partitionForKey, type Kafka, type Producer, type RecordMetadata, type TopicSpec } from './kafka.js';
import { fetchTopicId } from './topic-id.js';
import type { EventEnvelope } from './types.js';

interface EventLogOptions {
  /** How long the first waiting event may wait for company before a send. */
  lingerMs: number;
  maxBatchMessages: number;
  /** Below the broker's message.max.bytes (1 MB by default) per send. */
  maxBatchBytes: number;
  /**
   * How long a publish may wait for Kafka's acknowledgement before it is
   * refused (503). kafkajs retries an unreachable or unresponsive broker for a
   * minute and more, and the idempotent producer sends one batch at a time,
   * so without a bound every producer request would hang behind the stuck one.
   */
  produceTimeoutMs: number;
}

const DEFAULT_EVENT_LOG_OPTIONS: EventLogOptions = { lingerMs: 2, maxBatchMessages: 1000, maxBatchBytes: 900 * 1024, produceTimeoutMs: 10_000 };

const PLACEMENT_CACHE_SIZE = 100_000;

interface Outgoing {
  partition: number;
  key: string;
  value: Buffer;
  /** W3C trace context of the publish that wrote it (tracing on), as the record's `traceparent` header. */
  traceparent?: string;
}

/** The Kafka record header carrying the publishing span's W3C trace context. */
export const TRACEPARENT_HEADER = 'traceparent';

export class EventLog {
  /**
   * The producer sends go through, once connected. Thrown away after any
   * failed send: the idempotent producer numbers its batches per partition,
   * and kafkajs does not advance the number when a send fails, even when the
   * broker did append the batch and only the reply was lost. The next batch
   * would reuse the number: the broker takes one of the same size as a
   * duplicate (acknowledging the old batch's offsets, dropping the new events)
   * and refuses any other (OUT_OF_ORDER_SEQUENCE_NUMBER) for ever. A new
   * producer has a new producer id, so its numbering starts afresh.
   */
  private producer: Promise<Producer> | null = null;
  /** Fails the sends still under way on a thrown-away producer (kafkajs's disconnect does not end them). */
  private readonly abandon = new WeakMap<Promise<Producer>, { signal: Promise<never>; fire: (err: Error) => void }>();
  /** Producers thrown away after a failed send (for tests and logs). */
  replaced = 0;
  private readonly batcher: Batcher<Outgoing, Position>;
  private partitions = 0;
  private id: string | null = null;
  private readonly produceTimeoutMs: number;
  private readonly placement = new Map<string, number>();
  private state: 'new' | 'started' | 'stopped' = 'new';

  constructor(
    private readonly kafka: Kafka,
    readonly topic: TopicSpec,
    private readonly log: Logger,
    opts: EventLogOptions = DEFAULT_EVENT_LOG_OPTIONS,
  ) {
    this.produceTimeoutMs = opts.produceTimeoutMs;
    this.batcher = new Batcher<Outgoing, Position>({
      send: (items) => this.send(items),
      sizeOf: (item) => item.value.length + item.key.length + 64 + (item.traceparent === undefined ? 0 : 80),
      lingerMs: opts.lingerMs,
      maxItems: opts.maxBatchMessages,
      maxBytes: opts.maxBatchBytes,
    });
  }

  /** Creates the topic when missing, learns its partition count, connects the producer. */
  async start(): Promise<void> {
    const admin = this.kafka.admin();
    await admin.connect();
    try {
      await ensureTopic(admin, this.topic, this.log);
      this.partitions = await partitionCount(admin, this.topic.name);
      this.id = await fetchTopicId(this.topic.brokers, this.topic.name);
    } finally {
      await admin.disconnect();
    }
    await this.connectedProducer();
    this.state = 'started';
    this.log.info({ topic: this.topic.name, partitions: this.partitions }, 'event log producer ready');
  }

  get partitionCount(): number {
    return this.partitions;
  }

  /** The Kafka topic id read at start (a recreated topic has another). */
  get topicId(): string {
    if (this.id === null) throw new Error('EventLog.start() has not completed');
    return this.id;
  }

  /** The partition holding every event of an account. */
  partitionOf(accountId: string): number {
    if (this.partitions === 0) throw new Error('EventLog.start() has not completed');
    // murmur2 of the key costs ~2 µs; busy accounts come back all the time. Bounded: cleared when full.
    let partition = this.placement.get(accountId);
    if (partition === undefined) {
      if (this.placement.size >= PLACEMENT_CACHE_SIZE) this.placement.clear();
      partition = partitionForKey(accountId, this.partitions);
      this.placement.set(accountId, partition);
    }
    return partition;
  }

  /**
   * Appends the events; resolves with their positions, in input order, once
   * durable. Rejects with 503 `unavailable` when Kafka has not acknowledged
   * them within the produce timeout: events still queued are then never sent,
   * while a send already under way may still land (a refused request is not
   * an acknowledgement either way; a producer that retries may write twice).
   */
  async publish(envelopes: EventEnvelope[]): Promise<Position[]> {
    if (this.state !== 'started') throw unavailable('The event log');
    if (tracingOn()) return this.publishTraced(envelopes);
    return this.submit(envelopes.map((e) => ({ partition: this.partitionOf(e.account_id), key: e.account_id, value: encodeEnvelope(e) })));
  }

  /**
   * publish, inside a producer span (a child of the request's): each record carries that
   * span's `traceparent` header, taken here per publish, since sends batch the events of
   * many requests (an instrumented `producer.send` would stamp a whole batch with one trace).
   */
  private async publishTraced(envelopes: EventEnvelope[]): Promise<Position[]> {
    const span = tracer().startSpan(`${this.topic.name} publish`, {
      kind: SpanKind.PRODUCER,
      attributes: { 'messaging.system': 'kafka', 'messaging.destination.name': this.topic.name, 'messaging.batch.message_count': envelopes.length, 'event_platform.event_ids': envelopes.map((e) => e.id) },
    });
    const traceparent = traceparentOf(trace.setSpan(context.active(), span));
    try {
      const positions = await this.submit(envelopes.map((e) => ({ partition: this.partitionOf(e.account_id), key: e.account_id, value: encodeEnvelope(e), traceparent })));
      span.setAttribute('messaging.kafka.offset', positions.map((p) => String(p.offset)));
      return positions;
    } catch (err) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: (err as Error).message });
      throw err;
    } finally {
      span.end();
    }
  }

  private async submit(items: Outgoing[]): Promise<Position[]> {
    try {
      return await this.batcher.submit(items, undefined, this.produceTimeoutMs);
    } catch (err) {
      if (!(err instanceof BatchTimeoutError)) throw err;
      this.log.warn({ events: items.length, timeoutMs: this.produceTimeoutMs }, 'Kafka did not acknowledge in time; refusing');
      // The send under way may still be retrying: whatever it ends with, its producer's numbering is no longer trusted.
      this.discardProducer(this.producer, 'no acknowledgement within the produce timeout');
      throw unavailable('The event log');
    }
  }

  /** Sends what is queued, then disconnects. */
  async stop(): Promise<void> {
    if (this.state !== 'started') return;
    this.state = 'stopped';
    await this.batcher.flush();
    const producer = await this.producer?.catch(() => null);
    this.producer = null;
    await producer?.disconnect();
  }

  /** The current producer, connecting a new one when there is none (first start, or after a failure). */
  private connectedProducer(): Promise<Producer> {
    if (!this.producer) {
      const producer = createProducer(this.kafka);
      const connecting = producer.connect().then(() => producer);
      this.producer = connecting;
      let fire!: (err: Error) => void;
      const signal = new Promise<never>((_, reject) => (fire = reject));
      signal.catch(() => undefined);
      this.abandon.set(connecting, { signal, fire });
      // A producer that could not connect is dropped: the next send tries a new one.
      connecting.catch(() => {
        if (this.producer === connecting) this.producer = null;
        void producer.disconnect().catch(() => undefined);
      });
    }
    return this.producer;
  }

  private async send(items: Outgoing[]): Promise<Position[]> {
    const current = this.connectedProducer();
    try {
      const producer = await current;
      const sending = producer.send({
        topic: this.topic.name,
        acks: -1,
        messages: items.map((m) => (m.traceparent === undefined ? { partition: m.partition, key: m.key, value: m.value } : { partition: m.partition, key: m.key, value: m.value, headers: { [TRACEPARENT_HEADER]: m.traceparent } })),
      });
      sending.catch(() => undefined); // when abandoned, it ends (or not) on its own
      const abandoned = this.abandon.get(current)?.signal;
      const metadata = await (abandoned ? Promise.race([sending, abandoned]) : sending);
      return assignPositions(items, metadata);
    } catch (err) {
      this.discardProducer(current, 'send failed', err);
      // A failed send was not acknowledged: Kafka is unavailable as far as the caller can tell (503).
      // kafkajs throws some of these as plain Errors ("Broker not connected" while its broker hangs).
      if (err instanceof AppError || isDependencyError(err)) throw err;
      this.log.warn({ err }, 'a Kafka send failed with an error kafkajs does not name; answering 503');
      throw unavailable('The event log');
    }
  }

  /**
   * Throws `failed` away (when it is still the current producer) and starts
   * connecting a new one for the next send. The old one is disconnected, which
   * fails a send still in flight on it: that send's events were never
   * acknowledged (503), and nothing later is sent under its numbering.
   */
  private discardProducer(failed: Promise<Producer> | null, why: string, err?: unknown): void {
    if (!failed || this.producer !== failed || this.state === 'stopped') return;
    this.producer = null;
    this.replaced += 1;
    this.log.warn({ err, why, replaced: this.replaced }, 'replacing the Kafka producer (new producer id): the failed one may have left its sequence numbers behind the broker');
    // A send still under way on it fails now (its events were never acknowledged), so the next send need not wait for it.
    this.abandon.get(failed)?.fire(unavailable('The event log'));
    void failed.then((p) => p.disconnect()).catch(() => undefined);
    this.connectedProducer().catch((connectErr: unknown) => this.log.warn({ err: connectErr }, 'the new Kafka producer could not connect yet; the next send tries again'));
  }
}

/**
 * The broker gives each partition's record batch consecutive offsets from its
 * base offset, in the order the messages were given; so the n-th message of a
 * partition in one send sits at baseOffset + n.
 */
export function assignPositions(items: { partition: number }[], metadata: Pick<RecordMetadata, 'partition' | 'baseOffset'>[]): Position[] {
  const base = new Map<number, bigint>();
  for (const m of metadata) {
    if (m.baseOffset === undefined) throw new Error(`no base offset for partition ${m.partition}`);
    base.set(m.partition, BigInt(m.baseOffset));
  }
  const seen = new Map<number, bigint>();
  return items.map(({ partition }) => {
    const first = base.get(partition);
    if (first === undefined) throw new Error(`no produce result for partition ${partition}`);
    const index = seen.get(partition) ?? 0n;
    seen.set(partition, index + 1n);
    return { partition, offset: first + index };
  });
}
