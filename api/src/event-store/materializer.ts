/**
 * Writes the event log into MongoDB. One consumer group over all API
 * processes, so each partition has one writer at a time. Per chunk of a batch,
 * in offset order: insert each event's id and position into the events
 * collection (EventIdDoc, no body: idempotent, an id already stored is the
 * same event, and is skipped), then append the events to the account streams
 * the history is read from (pages.ts: new fragments, idempotent by offset;
 * the only copy of each event's body), then raise the partition's watermark with $max (never backwards),
 * then compact the streams that gathered enough fragments, then resolve and
 * commit the offsets. A crash anywhere in between makes the next owner rewrite a few
 * events identically; nothing is lost or doubled, and everything at or below
 * a watermark is in MongoDB.
 */
import { BSON, MongoBulkWriteError, MongoInvalidArgumentError, MongoServerError, type Collection } from 'mongodb';
import { decodeEnvelope, toEventDoc, unavailableEventDoc } from '#shared/eventlog/envelope.js';
import { createConsumer, type Consumer, type EachBatchPayload, type FetchFill, type Kafka, type KafkaMessage } from '#shared/eventlog/kafka.js';
import { SupervisedConsumer, type ConsumerHealth } from '#shared/eventlog/supervised-consumer.js';
import type { Logger } from '#shared/log.js';
import type { ConsumerLag } from '#shared/metrics.js';
import { eventIdDoc, type DeadEventDoc, type EventDoc, type EventIdDoc, type StoredEventDoc, type WatermarkDoc } from '#shared/mongo/documents.js';
import { FencedError, PageWriter, type PagesCollection } from './pages.js';
import { ensureFloor, sweepPartition, type SweepCounts } from './retention.js';
import { watermarkId } from './watermarks.js';

export interface MaterializerOptions {
  kafka: Kafka;
  /** Each event's id and position (its body goes to the streams only). */
  events: Collection<StoredEventDoc>;
  watermarks: Collection<WatermarkDoc>;
  /** The account streams history is read from (pages.ts); absent: not written (tests of other parts). */
  pages?: PagesCollection;
  /** Test hook of the streams' writer: called after a chunk's fragments are written; 'crash' stops there. */
  afterPages?: () => 'crash' | void;
  /** Events per page of the account streams (default PAGE_EVENTS; tests make pages small). */
  pageEvents?: number;
  /** Fragments a stream gathers before it is compacted (default pages.ts's FRAGMENTS; tests make it small). */
  fragments?: number;
  topic: string;
  groupId: string;
  log: Logger;
  /**
   * The Kafka id of the topic, once checked against MongoDB (topic-guard.ts);
   * null until then, and no watermark is written meanwhile. Watermarks are
   * written only on documents of this topic id, so one left from a recreated
   * topic's old log is never raised (the write fails until it is reset).
   * Absent: watermarks carry no topic id (tests of other parts).
   */
  topicId?: () => string | null;
  /** Where events the store refuses are kept (see `maxRefusals`); absent: they are retried for ever. */
  deadEvents?: Collection<DeadEventDoc>;
  /**
   * How many times in a row the store may refuse one event (an error about
   * that document, not an outage) before it goes to `deadEvents` and a
   * stand-in marked `data_unavailable` takes its place (default 5).
   */
  maxRefusals?: number;
  /** Told each event dead-lettered (the metric). */
  onDeadLetter?: (partition: number) => void;
  /** Told each watermark this process writes (feeds the local WatermarkReader). */
  onWatermark?: (partition: number, offset: bigint) => void;
  lag?: ConsumerLag;
  /**
   * Most events written as one chunk (default DEFAULT_CHUNK_EVENTS). Each
   * chunk costs a few commands whatever its size (pages.ts), so a backlog
   * drains faster in bigger chunks; a caught-up partition's batches are small
   * anyway.
   */
  chunkSize?: number;
  /**
   * How full a fetch must be before the broker answers (MATERIALIZER_FETCH_WAIT_MS
   * and FETCH_FILL_BYTES); absent: as soon as anything is there. Every chunk
   * costs the store a few commands whatever its size, and a caught-up
   * partition's chunks are a handful of events, each account's a fragment of
   * its own: waiting a bounded time for fuller fetches makes fewer, bigger
   * chunks, for at most that much more lag of history (readers at the head
   * are answered from the tail window meanwhile).
   */
  fetchFill?: FetchFill;
  /**
   * Test hook, called after each write of a chunk (`events`: the ids, `pages`, then `watermark`):
   * return 'crash' to act as if the process died right there.
   */
  afterWrite?: (stage: 'events' | 'pages' | 'watermark', partition: number, firstOffset: bigint, lastOffset: bigint) => 'crash' | void;
  /** Most ids per insert into `events` (default INSERT_SLICE; tests make it small). */
  insertSlice?: number;
  /** A consumer showing no sign of life this long is replaced (default 60 s; see SupervisedConsumer). */
  stallMs?: number;
  /** Makes the consumers (tests stand in a hung one). */
  newConsumer?: (kafka: Kafka, groupId: string) => Consumer;
  /** History is kept this long (EVENT_RETENTION_DAYS), then swept (retention.ts); absent: kept for ever. */
  retentionMs?: number;
  /** How often the partitions this process writes are swept (default 60 s). */
  sweepIntervalMs?: number;
  /** How long a raised floor stands before what lies below it is deleted (default 30 s; see retention.ts). */
  retentionGraceMs?: number;
}

const MAX_BACKOFF_MS = 5000;
/**
 * Events per chunk by default (MATERIALIZER_CHUNK_EVENTS). Bigger chunks drain
 * a backlog faster, but make the store busier in bursts for a delivery
 * process sharing it, so the tested default stays (docs/decisions.md; the
 * figures: docs/performance.md, "The materializer's chunk size").
 */
const DEFAULT_CHUNK_EVENTS = 500;
/**
 * Most ids per insert into `events` when a chunk is bigger. The page writes
 * are what a bigger chunk saves; one insert of 2,000 documents holds FerretDB's
 * write lock long enough to stall the delivery process's writes to the same
 * database (docs/performance.md, "The materializer's chunk size").
 */
const INSERT_SLICE = 500;
const DEFAULT_MAX_REFUSALS = 5;
/** The bytes a materializer fetch waits for (at most MATERIALIZER_FETCH_WAIT_MS): about 3,000 events of ~350 B, over the partitions the member writes. */
export const FETCH_FILL_BYTES = 1024 * 1024;

export class Materializer {
  private crashed = false;
  private readonly supervised: SupervisedConsumer;
  private readonly pages: PageWriter | null;

  constructor(private readonly opts: MaterializerOptions) {
    this.pages = opts.pages
      ? new PageWriter(opts.pages, {
          topicId: opts.topicId,
          pageEvents: opts.pageEvents,
          fragments: opts.fragments,
          afterPages: () => {
            if (opts.afterPages?.() !== 'crash') return;
            this.crashed = true;
            return 'crash';
          },
        })
      : null;
    // A consumer silent for stallMs is replaced by a new member of the same group, which resumes from the committed offsets (the writes are idempotent).
    this.supervised = new SupervisedConsumer({
      name: 'materializer',
      groupId: opts.groupId,
      log: opts.log,
      stallMs: opts.stallMs,
      newConsumer: () => (opts.newConsumer ? opts.newConsumer(opts.kafka, opts.groupId) : createConsumer(opts.kafka, opts.groupId, { fetch: opts.fetchFill })),
      run: (consumer) => this.runConsumer(consumer),
    });
  }

  /** Consumers replaced because they stalled (for tests and logs). */
  get replaced(): number {
    return this.supervised.replaced;
  }

  /** Events given up on and stored in dead_events (for tests and logs). */
  deadLettered = 0;
  /** How often the store refused each event not yet written, by event id. */
  private readonly refusals = new Map<string, number>();
  /** Events of the chunk being written that are dead-lettered: retries of the chunk store their stand-ins. */
  private readonly dead = new Set<string>();

  health(): ConsumerHealth {
    return this.supervised.health();
  }

  start(): Promise<void> {
    if (this.opts.retentionMs !== undefined && this.opts.pages && !this.sweeper) {
      const every = this.opts.sweepIntervalMs ?? 60_000;
      this.sweeper = setInterval(() => {
        this.sweep().catch((err: unknown) => this.opts.log.warn({ err }, 'could not sweep expired history; will try again'));
      }, every);
      this.sweeper.unref();
    }
    return this.supervised.start();
  }

  private sweeper: NodeJS.Timeout | undefined;
  /** Partitions with a floor document this process made sure of, and when each was last written here. */
  private readonly floors = new Map<number, number>();
  private floorsTopic: string | undefined;
  private sweeping = false;

  /**
   * Sweeps expired history (retention.ts) of the partitions this process has
   * written since it started (after a rebalance the previous owner may go on
   * sweeping one too: the same deletes twice, harmless). Called by the timer;
   * tests call it with a clock.
   */
  async sweep(now = new Date()): Promise<SweepCounts[]> {
    const { retentionMs, pages } = this.opts;
    if (retentionMs === undefined || !pages || this.sweeping) return [];
    const topicId = this.opts.topicId ? this.opts.topicId() : '';
    if (topicId === null) return [];
    this.sweeping = true;
    try {
      const out: SweepCounts[] = [];
      for (const partition of this.floors.keys()) {
        const counts = await sweepPartition({ pages, events: this.opts.events, topicId, retentionMs, graceMs: this.opts.retentionGraceMs, now }, partition);
        if (counts.events + counts.pages > 0) this.opts.log.info({ partition, ...counts }, 'deleted expired history');
        out.push(counts);
      }
      return out;
    } finally {
      this.sweeping = false;
    }
  }

  /** Before a partition's first chunk in this process: its retention floor exists (retention.ts). */
  private async floorFor(partition: number, firstOffset: bigint): Promise<void> {
    if (this.opts.retentionMs === undefined || !this.opts.pages) return;
    const topicId = this.opts.topicId ? (this.opts.topicId() ?? '') : '';
    if (topicId !== this.floorsTopic) {
      this.floors.clear();
      this.floorsTopic = topicId;
    }
    if (!this.floors.has(partition)) await ensureFloor(this.opts.pages, topicId, partition, Number(firstOffset));
    this.floors.set(partition, Date.now());
  }

  /** Which consumer is the current one: a replaced consumer's batch still running stops at its next check. */
  private generation = 0;

  private async runConsumer(consumer: Consumer): Promise<void> {
    // A replaced consumer (the watchdog's) may still be inside a chunk: the new one claims every partition afresh (pages.ts), which refuses the old one's writes.
    const generation = ++this.generation;
    this.pages?.forgetAll();
    await consumer.connect();
    await consumer.subscribe({ topic: this.opts.topic, fromBeginning: true });
    const eachBatch = (payload: EachBatchPayload): Promise<void> => this.handleBatch(payload, () => this.generation !== generation);
    await consumer.run({
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: 4,
      eachBatch: this.opts.lag?.track('materializer', consumer, this.opts.topic, eachBatch) ?? eachBatch,
    });
    this.opts.log.info({ group: this.opts.groupId }, 'materializer started');
  }

  stop(): Promise<void> {
    clearInterval(this.sweeper);
    this.sweeper = undefined;
    return this.supervised.stop();
  }

  private async handleBatch(payload: EachBatchPayload, replaced: () => boolean): Promise<void> {
    const { batch, resolveOffset, heartbeat, commitOffsetsIfNecessary, isRunning, isStale } = payload;
    const size = this.opts.chunkSize ?? DEFAULT_CHUNK_EVENTS;
    // Not proof of ownership (kafkajs does not see a session that expired while this process stalled): the page writes are fenced (pages.ts).
    const lost = (): boolean => replaced() || !isRunning() || isStale();
    for (let i = 0; i < batch.messages.length; i += size) {
      if (this.crashed) return sleep(50); // a dead process commits nothing
      if (lost()) return;
      const chunk = batch.messages.slice(i, i + size);
      const lastOffset = (chunk.at(-1) as KafkaMessage).offset;
      const written = await this.persist(batch.partition, chunk, BigInt(lastOffset), lost, heartbeat);
      if (!written) return;
      resolveOffset(lastOffset);
      await commitOffsetsIfNecessary();
      await heartbeat();
    }
  }

  /**
   * Retries until written, or until this consumer no longer owns the
   * partition. An outage (MongoDB down, slow, failing over) is retried for as
   * long as it lasts. An event the store refuses (an error about that
   * document) is retried `maxRefusals` times, then dead-lettered: the
   * partition moves on instead of stalling every reader behind it.
   */
  private async persist(partition: number, chunk: KafkaMessage[], lastOffset: bigint, lost: () => boolean, heartbeat: () => Promise<void>): Promise<boolean> {
    const docs = firstCopies(this.decode(partition, chunk));
    // Between the steps of a chunk: a sign of life for the watchdog while the store is slow, and how a
    // rebalance reaches this member within a heartbeat interval rather than at the end of the chunk (its
    // error leaves the batch; the next owner rewrites the chunk, idempotently).
    const beat = async (): Promise<void> => {
      try {
        await heartbeat();
      } catch (err) {
        throw new HeartbeatFailed(err);
      }
    };
    let backoff = 100;
    for (;;) {
      const deadBefore = this.deadLettered;
      try {
        const standIns = new Set<string>();
        const elsewhere = new Set<string>();
        // The events go in slices: one insert holds the database's write lock (SQLite under FerretDB) for all its documents, and other writers wait behind it.
        const slice = this.opts.insertSlice ?? INSERT_SLICE;
        for (let at = 0; at < docs.length; at += slice) {
          await this.insertNew(docs.slice(at, at + slice), partition, standIns, elsewhere);
          await beat();
        }
        if (this.crashesAfter('events', partition, chunk, lastOffset)) return false;
        if (this.pages) {
          // An id stored before at another position (a producer's retry the broker took twice) is not the event's: only its first copy is in the streams.
          const own = elsewhere.size === 0 ? docs : docs.filter((d) => !elsewhere.has(d._id));
          const stored = standIns.size === 0 ? own : own.map((d) => (standIns.has(d._id) ? unavailableEventDoc(d) : d));
          await this.floorFor(partition, BigInt((chunk[0] as KafkaMessage).offset));
          if (!(await this.pages.write(partition, stored, BigInt((chunk[0] as KafkaMessage).offset), lastOffset))) return false;
          if (this.crashesAfter('pages', partition, chunk, lastOffset)) return false;
          await beat();
        }
        await this.writeWatermark(partition, lastOffset);
        this.opts.onWatermark?.(partition, lastOffset);
        if (this.crashesAfter('watermark', partition, chunk, lastOffset)) return false;
        await this.compact(partition, BigInt((chunk[0] as KafkaMessage).offset));
        return true;
      } catch (err) {
        if (err instanceof HeartbeatFailed) throw err.cause; // kafkajs rejoins; nothing of this chunk is committed
        if (err instanceof FencedError) {
          // A newer writer claimed the partition (this process stalled past its session): it writes from the committed offset on.
          this.opts.log.warn({ partition, lastOffset: lastOffset.toString(), epoch: err.epoch }, 'materializer lost the partition to a newer writer; its write was refused');
          return false;
        }
        this.opts.log.warn({ err, partition, lastOffset: lastOffset.toString(), retryInMs: backoff }, 'materializer write failed; retrying');
        if (lost()) return false;
        await sleep(backoff);
        // An event given up on is progress: the next refused one gets its own short tries.
        backoff = this.deadLettered > deadBefore ? 100 : Math.min(backoff * 2, MAX_BACKOFF_MS);
        await heartbeat(); // also how a rebalance reaches us while MongoDB is down
        if (lost()) return false;
      }
    }
  }

  /**
   * Compacts the streams of the partition that gathered enough fragments
   * (pages.ts): after the watermark, so readers never wait for it. A failure
   * is left to the next chunk's compaction (the fragments stay readable).
   */
  private async compact(partition: number, chunkFirst: bigint): Promise<void> {
    if (!this.pages) return;
    try {
      await this.pages.compact(partition, chunkFirst);
    } catch (err) {
      if (err instanceof FencedError) this.opts.log.warn({ partition, epoch: err.epoch }, 'materializer lost the partition to a newer writer; its compaction was refused');
      else this.opts.log.warn({ err, partition }, 'could not compact history fragments; the next chunk tries again');
    }
  }

  private async writeWatermark(partition: number, lastOffset: bigint): Promise<void> {
    const filter: { _id: string; topic_id?: string } = { _id: watermarkId(this.opts.topic, partition) };
    if (this.opts.topicId) {
      const topicId = this.opts.topicId();
      if (topicId === null) throw new Error('the event topic is not checked against MongoDB yet (topic guard); no watermark is written until it is');
      // Equality in the filter: an upsert copies it into a new document; a document of another topic id is never raised (duplicate _id).
      filter.topic_id = topicId;
    }
    await this.opts.watermarks.updateOne(filter, { $max: { offset: Number(lastOffset) }, $set: { updated_at: new Date() }, $setOnInsert: { topic: this.opts.topic, partition } }, { upsert: true });
  }

  /**
   * Inserts the events' ids and positions (eventIdDoc). Plain ordered inserts (an
   * order of magnitude faster than upserts on the test server). Ids already
   * stored, after a restart, fail as duplicates: then only the missing ones
   * are inserted. When the store refuses a document, or an event's body
   * cannot be encoded as its stream stores it (checkBody), the chunk is
   * written one event at a time to find which.
   * `standIns` gets the ids of events stored as stand-ins (dead-lettered),
   * `elsewhere` those of events whose id was stored before at another position.
   */
  private async insertNew(docs: EventDoc[], partition: number, standIns: Set<string>, elsewhere: Set<string>): Promise<void> {
    for (const d of docs) if (this.dead.has(d._id)) standIns.add(d._id);
    let pending = this.dead.size === 0 ? docs : docs.map((d) => (this.dead.has(d._id) ? unavailableEventDoc(d) : d));
    if (pending.some((d) => !encodable(d))) return this.insertOneByOne(pending, partition, standIns, elsewhere);
    for (let attempt = 0; pending.length > 0; attempt += 1) {
      try {
        await this.opts.events.insertMany(pending.map(eventIdDoc), { ordered: true });
        this.forgetRefusals(pending);
        return;
      } catch (err) {
        if (isRefusal(err)) return this.insertOneByOne(pending, partition, standIns, elsewhere);
        if (!isDuplicateKeyOnly(err) || attempt >= 3) throw err;
        const ids = pending.map((d) => d._id);
        const found = await storedCopies(this.opts.events, ids);
        const mine = new Map(pending.map((d) => [d._id, d]));
        for (const d of found) {
          if (d.data_unavailable) standIns.add(d._id);
          const doc = mine.get(d._id);
          if (doc && (d.partition !== doc.partition || d.offset !== doc.offset)) elsewhere.add(d._id);
        }
        const stored = new Set(found.map((d) => d._id));
        pending = pending.filter((d) => !stored.has(d._id));
      }
    }
  }

  private async insertOneByOne(docs: EventDoc[], partition: number, standIns: Set<string>, elsewhere: Set<string>): Promise<void> {
    for (const doc of docs) {
      try {
        checkBody(doc);
        await this.opts.events.insertOne(eventIdDoc(doc));
        this.refusals.delete(doc._id);
        this.dead.delete(doc._id);
      } catch (err) {
        if (err instanceof MongoServerError && err.code === 11000) {
          // Stored before a restart, or the same id at another position (see persist).
          const prior = await this.opts.events.findOne({ _id: doc._id }, { projection: { partition: 1, offset: 1 } });
          if (prior && (prior.partition !== doc.partition || prior.offset !== doc.offset)) elsewhere.add(doc._id);
          continue;
        }
        if (!isRefusal(err)) throw err; // an outage: retried as long as it lasts
        const refused = (this.refusals.get(doc._id) ?? 0) + 1;
        this.refusals.set(doc._id, refused);
        if (!this.opts.deadEvents || refused < (this.opts.maxRefusals ?? DEFAULT_MAX_REFUSALS)) throw err;
        await this.deadLetter(doc, partition, err, refused);
        standIns.add(doc._id);
      }
    }
    this.forgetRefusals(docs);
  }

  /**
   * Keeps the refused event in dead_events with its error, and stores a
   * stand-in at its position (its id marked `data_unavailable` here; id,
   * type, times and no data in its stream) so readers see that an event was
   * there instead of a silent gap.
   */
  private async deadLetter(doc: EventDoc, partition: number, err: unknown, failures: number): Promise<void> {
    const error = err instanceof Error ? `${err.name}: ${err.message}`.slice(0, 2000) : String(err).slice(0, 2000);
    const dead: DeadEventDoc = {
      _id: doc._id,
      account_id: doc.account_id,
      type: doc.type,
      topic: this.opts.topic,
      partition,
      offset: doc.offset,
      envelope: safeJson(doc),
      error,
      failures,
      at: new Date(),
    };
    await this.opts.deadEvents!.replaceOne({ _id: dead._id }, dead, { upsert: true });
    try {
      await this.opts.events.insertOne(eventIdDoc(unavailableEventDoc(doc)));
    } catch (insertErr) {
      if (!(insertErr instanceof MongoServerError && insertErr.code === 11000)) throw insertErr;
    }
    this.refusals.delete(doc._id);
    this.dead.add(doc._id);
    this.deadLettered += 1;
    this.opts.onDeadLetter?.(partition);
    this.opts.log.error(
      { eventId: doc._id, accountId: doc.account_id, type: doc.type, partition, offset: doc.offset, failures, error },
      'DEAD-LETTERED AN EVENT: MongoDB refused it again and again; kept in dead_events, readers get it with data_unavailable',
    );
  }

  private forgetRefusals(docs: EventDoc[]): void {
    if (this.refusals.size === 0 && this.dead.size === 0) return;
    for (const d of docs) {
      this.refusals.delete(d._id);
      this.dead.delete(d._id);
    }
  }

  private crashesAfter(stage: 'events' | 'pages' | 'watermark', partition: number, chunk: KafkaMessage[], lastOffset: bigint): boolean {
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

/**
 * True when the store refused a document for what it is (the client cannot
 * encode it, or the server answers one of the errors about a document's
 * content), as opposed to an outage (network, selection timeout, shutdown,
 * failover, a lock, an internal error), which says nothing about the
 * document and is retried for as long as it lasts. Only known content errors
 * count: an unknown one is retried (and logged) rather than dead-lettered.
 */
export function isRefusal(err: unknown): boolean {
  if (BSON.BSONError.isBSONError(err) || err instanceof MongoInvalidArgumentError) return true;
  if (err instanceof MongoBulkWriteError) {
    const errors = Array.isArray(err.writeErrors) ? err.writeErrors : [err.writeErrors];
    return errors.some((e) => REFUSAL_CODES.has(e.code));
  }
  return err instanceof MongoServerError && typeof err.code === 'number' && REFUSAL_CODES.has(err.code);
}

/** Server error codes about a document's content (FerretDB answers BadValue for an array inside an array). */
const REFUSAL_CODES = new Set([
  2, // BadValue
  9, // FailedToParse
  14, // TypeMismatch
  15, // Overflow
  22, // InvalidBSON
  52, // DollarPrefixedFieldName
  53, // InvalidIdField
  55, // InvalidDBRef
  56, // EmptyFieldName
  57, // DottedFieldName
  121, // DocumentValidationFailure
  10334, // BSONObjectTooLarge
  17280, // KeyTooLong
]);

/**
 * The chunk's events without the later copies of an id (a producer's retry
 * the broker took twice, both in this chunk): an event is stored, and in its
 * streams, once, at its first position. Done before the chunk is cut into
 * insert slices, so copies in two slices are found too; a copy in a later
 * chunk is found by its insert (stored before at another position: see persist).
 */
function firstCopies(docs: EventDoc[]): EventDoc[] {
  const seen = new Set<string>();
  const out: EventDoc[] = [];
  for (const d of docs) {
    if (seen.has(d._id)) continue;
    seen.add(d._id);
    out.push(d);
  }
  return out.length === docs.length ? docs : out;
}

function safeJson(doc: EventDoc): string {
  try {
    return JSON.stringify(doc);
  } catch {
    return '(not serializable)';
  }
}

/** Lookups of a chunk's stored copies sent at once. */
const LOOKUPS_AT_ONCE = 16;

/**
 * The stored copies of these ids, each read by `_id` equality: an index
 * lookup on every store, where `_id: {$in: …}` reads the whole collection on
 * the test server (FerretDB on SQLite pushes only `_id` equality down), many
 * seconds without a heartbeat once history is large, which is what a chunk
 * written again after a rebalance or a restart sends.
 */
async function storedCopies(events: Collection<StoredEventDoc>, ids: string[]): Promise<Pick<EventIdDoc, '_id' | 'data_unavailable' | 'partition' | 'offset'>[]> {
  const out: Pick<EventIdDoc, '_id' | 'data_unavailable' | 'partition' | 'offset'>[] = [];
  for (let at = 0; at < ids.length; at += LOOKUPS_AT_ONCE) {
    const got = await Promise.all(ids.slice(at, at + LOOKUPS_AT_ONCE).map((id) => events.findOne({ _id: id }, { projection: { _id: 1, data_unavailable: 1, partition: 1, offset: 1 } })));
    for (const d of got) if (d) out.push(d);
  }
  return out;
}

/** The most bytes a stream's document may hold (MongoDB's document limit, 16 MB, less room for the page around the event). */
const MAX_EVENT_BSON = 16 * 1024 * 1024 - 16 * 1024;

/**
 * Throws (a BSONError: a refusal, see isRefusal) when the event's body cannot
 * be stored in its stream, which holds it as BSON (pages.ts): a key BSON
 * cannot encode (a NUL byte), or more than a document may hold. The same
 * check on every store: the events collection no longer sees the body, and
 * a stream's page holds it packed, so the store itself sees no field of it.
 * The body comes from JSON.parse (decodeEnvelope), so those are the only
 * values BSON cannot take; checked by a walk of the keys and BSON's size
 * count, a few times cheaper than encoding it. A stand-in always passes.
 */
export function checkBody(doc: EventDoc): void {
  if (doc.data_unavailable) return;
  const key = nulKey(doc.data);
  if (key !== null) throw new BSON.BSONError(`key ${JSON.stringify(key)} must not contain null bytes`);
  const size = BSON.calculateObjectSize(doc);
  if (size > MAX_EVENT_BSON) throw new BSON.BSONError(`the event's BSON is ${size} bytes, more than a stream's document may hold (${MAX_EVENT_BSON})`);
}

/** The first key holding a NUL byte in a parsed JSON value, or null. */
function nulKey(value: unknown): string | null {
  if (value === null || typeof value !== 'object') return null;
  if (Array.isArray(value)) {
    for (const item of value) {
      const found = nulKey(item);
      if (found !== null) return found;
    }
    return null;
  }
  for (const [k, v] of Object.entries(value)) {
    if (k.includes('\u0000')) return k;
    const found = nulKey(v);
    if (found !== null) return found;
  }
  return null;
}

function encodable(doc: EventDoc): boolean {
  try {
    checkBody(doc);
    return true;
  } catch {
    return false;
  }
}

function isDuplicateKeyOnly(err: unknown): boolean {
  if (err instanceof MongoBulkWriteError) {
    const errors = Array.isArray(err.writeErrors) ? err.writeErrors : [err.writeErrors];
    return errors.length > 0 && errors.every((e) => e.code === 11000);
  }
  return err instanceof MongoServerError && err.code === 11000;
}

/** A heartbeat inside a chunk failed (a rebalance, or this member is no longer known): leave the batch. */
class HeartbeatFailed extends Error {
  constructor(override readonly cause: unknown) {
    super('heartbeat failed during a chunk write');
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
