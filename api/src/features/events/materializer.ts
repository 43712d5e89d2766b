/**
 * Writes the event log into MongoDB. One consumer group over all API
 * processes, so each partition has one writer at a time. Per chunk of a batch,
 * in offset order: insert the events keyed by id (idempotent: an id already
 * stored is the same event, and is skipped), then raise the
 * partition's watermark with $max (never backwards), then resolve and commit
 * the offsets. A crash anywhere in between makes the next owner rewrite a few
 * events identically; nothing is lost or doubled, and everything at or below
 * a watermark is in MongoDB.
 */
import { MongoBulkWriteError, MongoServerError, type Collection } from 'mongodb';
import { decodeEnvelope, toEventDoc } from '../../../../shared/src/eventlog/envelope.js';
import { createConsumer, type Consumer, type EachBatchPayload, type Kafka, type KafkaMessage } from '../../../../shared/src/eventlog/kafka.js';
import { SupervisedConsumer, type ConsumerHealth } from '../../../../shared/src/eventlog/supervised-consumer.js';
import type { Logger } from '../../../../shared/src/log.js';
import type { ConsumerLag } from '../../../../shared/src/metrics.js';
import type { EventDoc, WatermarkDoc } from '../../../../shared/src/mongo/documents.js';
import { watermarkId } from './watermarks.js';

export interface MaterializerOptions {
  kafka: Kafka;
  events: Collection<EventDoc>;
  watermarks: Collection<WatermarkDoc>;
  topic: string;
  groupId: string;
  log: Logger;
  /** Told each watermark this process writes (feeds the local WatermarkReader). */
  onWatermark?: (partition: number, offset: bigint) => void;
  lag?: ConsumerLag;
  chunkSize?: number;
  /**
   * Test hook, called after each write of a chunk (`events`, then `watermark`):
   * return 'crash' to act as if the process died right there.
   */
  afterWrite?: (stage: 'events' | 'watermark', partition: number, firstOffset: bigint, lastOffset: bigint) => 'crash' | void;
  /** A consumer showing no sign of life this long is replaced (default 60 s; see SupervisedConsumer). */
  stallMs?: number;
  /** Makes the consumers (tests stand in a hung one). */
  newConsumer?: (kafka: Kafka, groupId: string) => Consumer;
}

const MAX_BACKOFF_MS = 5000;

export class Materializer {
  private crashed = false;
  private readonly supervised: SupervisedConsumer;

  constructor(private readonly opts: MaterializerOptions) {
    // A consumer silent for stallMs is replaced by a new member of the same group, which resumes from the committed offsets (the writes are idempotent).
    this.supervised = new SupervisedConsumer({
      name: 'materializer',
      groupId: opts.groupId,
      log: opts.log,
      stallMs: opts.stallMs,
      newConsumer: () => (opts.newConsumer ?? createConsumer)(opts.kafka, opts.groupId),
      run: (consumer) => this.runConsumer(consumer),
    });
  }

  /** Consumers replaced because they stalled (for tests and logs). */
  get replaced(): number {
    return this.supervised.replaced;
  }

  health(): ConsumerHealth {
    return this.supervised.health();
  }

  start(): Promise<void> {
    return this.supervised.start();
  }

  private async runConsumer(consumer: Consumer): Promise<void> {
    await consumer.connect();
    await consumer.subscribe({ topic: this.opts.topic, fromBeginning: true });
    const eachBatch = (payload: EachBatchPayload): Promise<void> => this.handleBatch(payload);
    await consumer.run({
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: 4,
      eachBatch: this.opts.lag?.track('materializer', consumer, this.opts.topic, eachBatch) ?? eachBatch,
    });
    this.opts.log.info({ group: this.opts.groupId }, 'materializer started');
  }

  stop(): Promise<void> {
    return this.supervised.stop();
  }

  private async handleBatch(payload: EachBatchPayload): Promise<void> {
    const { batch, resolveOffset, heartbeat, commitOffsetsIfNecessary, isRunning, isStale } = payload;
    const size = this.opts.chunkSize ?? 500;
    for (let i = 0; i < batch.messages.length; i += size) {
      if (this.crashed) return sleep(50); // a dead process commits nothing
      if (!isRunning() || isStale()) return;
      const chunk = batch.messages.slice(i, i + size);
      const lastOffset = (chunk.at(-1) as KafkaMessage).offset;
      const written = await this.persist(batch.partition, chunk, BigInt(lastOffset), () => !isRunning() || isStale(), heartbeat);
      if (!written) return;
      resolveOffset(lastOffset);
      await commitOffsetsIfNecessary();
      await heartbeat();
    }
  }

  /** Retries until written, or until this consumer no longer owns the partition. */
  private async persist(partition: number, chunk: KafkaMessage[], lastOffset: bigint, lost: () => boolean, heartbeat: () => Promise<void>): Promise<boolean> {
    const docs = this.decode(partition, chunk);
    let backoff = 100;
    for (;;) {
      try {
        await this.insertNew(docs);
        if (this.crashesAfter('events', partition, chunk, lastOffset)) return false;
        await this.opts.watermarks.updateOne(
          { _id: watermarkId(this.opts.topic, partition) },
          { $max: { offset: Number(lastOffset) }, $set: { updated_at: new Date() }, $setOnInsert: { topic: this.opts.topic, partition } },
          { upsert: true },
        );
        this.opts.onWatermark?.(partition, lastOffset);
        return !this.crashesAfter('watermark', partition, chunk, lastOffset);
      } catch (err) {
        this.opts.log.warn({ err, partition, lastOffset: lastOffset.toString(), retryInMs: backoff }, 'materializer write failed; retrying');
        if (lost()) return false;
        await sleep(backoff);
        backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
        await heartbeat(); // also how a rebalance reaches us while MongoDB is down
        if (lost()) return false;
      }
    }
  }

  /**
   * Plain ordered inserts (an order of magnitude faster than upserts on the
   * test server). Ids already stored, after a restart, fail as duplicates:
   * then only the missing ones are inserted.
   */
  private async insertNew(docs: EventDoc[]): Promise<void> {
    let pending = docs;
    for (let attempt = 0; pending.length > 0; attempt += 1) {
      try {
        await this.opts.events.insertMany(pending, { ordered: true });
        return;
      } catch (err) {
        if (!isDuplicateKeyOnly(err) || attempt >= 3) throw err;
        const ids = pending.map((d) => d._id);
        const stored = new Set((await this.opts.events.find({ _id: { $in: ids } }, { projection: { _id: 1 } }).toArray()).map((d) => d._id));
        pending = pending.filter((d) => !stored.has(d._id));
      }
    }
  }

  private crashesAfter(stage: 'events' | 'watermark', partition: number, chunk: KafkaMessage[], lastOffset: bigint): boolean {
    if (this.opts.afterWrite?.(stage, partition, BigInt((chunk[0] as KafkaMessage).offset), lastOffset) !== 'crash') return false;
    this.crashed = true;
    return true;
  }

  private decode(partition: number, chunk: KafkaMessage[]): EventDoc[] {
    const docs: EventDoc[] = [];
    for (const message of chunk) {
      const envelope = decodeEnvelope(message.value);
      if (!envelope) {
        // Only this service produces to the topic; a foreign message is skipped, loudly, rather than stalling the partition.
        this.opts.log.error({ partition, offset: message.offset }, 'skipping a message that is not an event envelope');
        continue;
      }
      docs.push(toEventDoc(envelope, { partition, offset: BigInt(message.offset) }));
    }
    return docs;
  }
}

function isDuplicateKeyOnly(err: unknown): boolean {
  if (err instanceof MongoBulkWriteError) {
    const errors = Array.isArray(err.writeErrors) ? err.writeErrors : [err.writeErrors];
    return errors.length > 0 && errors.every((e) => e.code === 11000);
  }
  return err instanceof MongoServerError && err.code === 11000;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
