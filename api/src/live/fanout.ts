/**
 * The fan-out consumer: every API process reads every partition (its own
 * group, committing nothing) and hands each event to this process's waiters
 * of that account. The fan-out position P of a partition (the next offset
 * not yet dispatched) is pinned at startup to the end offsets and then only
 * moves forward one dispatched offset at a time; the consumer is made to
 * follow P, never the other way round:
 * - on every group join (start, session timeout, coordinator move, broker
 *   restart, kafkajs restart, watchdog replacement) each assigned partition
 *   is sought to P, since a group that commits nothing would otherwise
 *   resume at the partition's end and skip what was written meanwhile;
 * - a batch that starts after P is sought back to P;
 * - offsets the broker no longer has (P below the partition's low watermark)
 *   are read from MongoDB (every event below the materializer's watermark is
 *   stored there) and dispatched in order: a gap is filled, never skipped.
 * Every event dispatched is also appended to the tail window (tail-window.ts),
 * which follows P: a reset at startup, at a gap filled from MongoDB, and at
 * any offset that does not follow the last one. An event of an account with
 * no waiter here is appended as its text, unparsed (a read parses it if it
 * ever reaches it): most events are nobody's on a given pod.
 *
 * Dormant: a process that has held no waiter and served no read for
 * `dormantAfterMs` pauses every partition, so it fetches nothing: fetching is
 * what a pod pays per event on the topic (each fetch round trip costs far more
 * than the events it brings), and an unused pod should pay nothing. While
 * dormant, P does not move and the tail window does not answer (reads go to
 * MongoDB, as on a pod whose fan-out fell behind). The first reader wakes it
 * (awake(), which openFeed awaits before it registers): P of every partition
 * jumps to the log's end offsets, the window and RecentAccounts restart
 * there, and the partitions resume, as at startup. Jumping P is safe because
 * no waiter exists while dormant (the jump skips offsets nobody here was
 * waiting for, and every later reader registers after it).
 */
import { randomBytes } from 'node:crypto';
import { decodeEnvelope, peekEnvelopeId, toRecord } from '#shared/eventlog/envelope.js';
import { TRACEPARENT_HEADER } from '#shared/eventlog/event-log.js';
import { createConsumer, endOffsets, type Consumer, type EachBatchPayload, type Kafka, type KafkaMessage } from '#shared/eventlog/kafka.js';
import { SupervisedConsumer, type ConsumerHealth } from '#shared/eventlog/supervised-consumer.js';
import type { Logger } from '#shared/log.js';
import type { ConsumerLag } from '#shared/metrics.js';
import { tracingOn, type EventTraces } from '#shared/telemetry.js';
import { liveStep, tracingLiveSteps } from './live-trace.js';
import { RecentAccounts } from './recent-accounts.js';
import { TailWindow } from './tail-window.js';
import type { WaiterRegistry } from './waiters.js';
import type { StoredEvent } from '../event-store/types.js';

/** What the fan-out reads from MongoDB to fill a gap below the broker's low watermark. */
export interface FanOutHistory {
  /** Resolves true once the partition's materialized offset is at least `offset`, false after `timeoutMs`. */
  waitForWatermark(partition: number, offset: bigint, timeoutMs: number): Promise<boolean>;
  /** Stored events of every account with offsets in [from, before), oldest first, at most `limit`. */
  readPartition(partition: number, from: bigint, before: bigint, limit: number): Promise<StoredEvent[]>;
}

export interface FanOutOptions {
  kafka: Kafka;
  topic: string;
  /** Group id prefix; a random suffix keeps two processes from ever sharing a group. */
  groupPrefix: string;
  instanceId: string;
  registry: WaiterRegistry;
  log: Logger;
  lag?: ConsumerLag;
  /** Accounts remembered per partition for RecentAccounts (default 20,000, about 2 MB). */
  recentAccountsPerPartition?: number;
  /** Where a gap below the broker's low watermark is read from. */
  history: FanOutHistory;
  /** A consumer showing no sign of life this long is replaced (default 60 s). */
  stallMs?: number;
  /** Makes the consumers (tests stand in a hung one). */
  newConsumer?: (kafka: Kafka, groupId: string) => Consumer;
  /** Readers woken after which a batch lets the event loop run (default WAKE_SLICE; tests set it low). */
  wakeSlice?: number;
  /** The recent events kept in memory for readers near the head (default: none kept). */
  tail?: TailWindow;
  /** Where each record's `traceparent` header is noted by event id, for the reads that return it (tracing on). */
  traces?: EventTraces;
  /** Pause every partition after this long with no waiter and no read (0 or absent: never). */
  dormantAfterMs?: number;
  /**
   * The window answers only while the consumer was heard from within this
   * (default 5 s, at most stallMs): a fan-out that silently stopped would
   * otherwise hold readers at its head while MongoDB moves on.
   */
  tailSilenceMs?: number;
}

const GAP_PAGE = 500;
/**
 * Readers woken (each answered or written to in the same tick) after which a
 * batch's dispatch lets the event loop run before going on, so one event per
 * account reaching thousands of held readers does not hold the loop for one
 * long tick (docs/performance.md, "A held reader in bytes"): in slices,
 * other requests are served in between.
 */
const WAKE_SLICE = 500;

export class FanOut {
  readonly groupId: string;
  private readonly positions = new Map<number, bigint>();
  /** Work on one partition (a batch, a gap fill) runs one at a time, in order. */
  private readonly lanes = new Map<number, Promise<void>>();
  private readonly supervised: SupervisedConsumer;
  /** Which accounts had events among the offsets dispatched (lets a resuming feed skip MongoDB). */
  readonly recent: RecentAccounts;
  /** The most recent events of each partition, gap-free up to P (readers near the head are answered from it). */
  readonly tail: TailWindow;
  /** Group joins seen (for tests and logs). */
  joins = 0;
  /** Readers woken in this turn of the event loop (WAKE_SLICE), over every partition's batch. */
  private woken = 0;
  /** The next turn, shared: batches of several partitions resuming together still wake one slice per turn. */
  private turn: Promise<void> | null = null;
  /** Every partition paused (see the header): no waiter, no read for dormantAfterMs. */
  private sleeping = false;
  private waking: Promise<void> | null = null;
  private lastUse = Date.now();
  private dormancyTimer: NodeJS.Timeout | null = null;

  constructor(private readonly opts: FanOutOptions) {
    this.recent = new RecentAccounts(opts.recentAccountsPerPartition ?? 20_000);
    this.tail = opts.tail ?? new TailWindow({ events: 0, bytes: 0 });
    this.groupId = `${opts.groupPrefix}.${opts.instanceId}.${randomBytes(3).toString('hex')}`;
    this.supervised = new SupervisedConsumer({
      name: 'fan-out',
      groupId: this.groupId,
      log: opts.log,
      stallMs: opts.stallMs,
      newConsumer: () => (opts.newConsumer ?? createConsumer)(opts.kafka, this.groupId),
      run: (consumer) => this.runConsumer(consumer),
    });
  }

  async start(): Promise<void> {
    const { kafka, topic } = this.opts;
    const admin = kafka.admin();
    await admin.connect();
    try {
      for (const [partition, offset] of await endOffsets(admin, topic)) {
        this.positions.set(partition, offset);
        this.recent.reset(partition, offset);
        this.tail.reset(partition, offset);
      }
    } finally {
      await admin.disconnect();
    }
    await this.supervised.start();
    const after = this.opts.dormantAfterMs ?? 0;
    if (after > 0) {
      this.dormancyTimer = setInterval(() => this.maybeSleep(), Math.max(50, Math.min(1000, after / 4)));
      this.dormancyTimer.unref();
    }
  }

  /** Dormant: every partition paused, P not moving, the window not answering. */
  get dormant(): boolean {
    return this.sleeping;
  }

  /** A read was served (or is being): postpones dormancy. */
  touch(): void {
    this.lastUse = Date.now();
  }

  /**
   * Resolves once the fan-out is not dormant (at once when it is not), P of
   * every partition then at or past the log's end offsets read after this
   * call. A reader awaits it before noting P and registering.
   */
  awake(): Promise<void> {
    this.touch();
    if (!this.sleeping) return Promise.resolve();
    this.waking ??= this.wake().finally(() => {
      this.waking = null;
      this.touch();
    });
    return this.waking;
  }

  private maybeSleep(): void {
    const consumer = this.supervised.consumer;
    if (this.opts.registry.size > 0) this.touch(); // dormancy counts from when the last waiter left
    if (this.sleeping || this.waking || !consumer || this.opts.registry.size > 0) return;
    if (Date.now() - this.lastUse < (this.opts.dormantAfterMs ?? 0)) return;
    try {
      consumer.pause([{ topic: this.opts.topic }]);
    } catch {
      return; // not running yet (starting, or being replaced): try again at the next check
    }
    this.sleeping = true;
    this.opts.log.info({ group: this.groupId }, 'fan-out dormant: no reader and no read for a while; every partition paused until one comes');
  }

  /** P of every partition to max(P, end offset), the window and RecentAccounts restarted there, partitions resumed. */
  private async wake(): Promise<void> {
    const { kafka, topic, log } = this.opts;
    const admin = kafka.admin();
    let ends: Map<number, bigint>;
    await admin.connect();
    try {
      ends = await endOffsets(admin, topic);
    } finally {
      await admin.disconnect().catch(() => undefined);
    }
    await Promise.all(
      [...ends].map(([partition, end]) =>
        this.inLane(partition, async () => {
          const known = this.positions.get(partition);
          const at = known !== undefined && known > end ? known : end;
          this.positions.set(partition, at);
          this.recent.reset(partition, at);
          this.tail.reset(partition, at);
          try {
            this.supervised.consumer?.seek({ topic, partition, offset: at.toString() });
          } catch {
            // Not running yet (being replaced): its start and every join seek each partition to P.
          }
        }),
      ),
    );
    this.sleeping = false;
    try {
      this.supervised.consumer?.resume([{ topic }]);
    } catch {
      // Not running (being replaced): a new consumer starts unpaused.
    }
    log.info({ group: this.groupId }, 'fan-out awake: a reader came; every partition resumed at the end of the log');
  }

  private async runConsumer(consumer: Consumer): Promise<void> {
    const { topic, log } = this.opts;
    consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => this.onJoin(consumer, payload.memberAssignment[topic] ?? []));
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: false });
    const eachBatch = (payload: EachBatchPayload): Promise<void> => this.handleBatch(consumer, payload);
    await consumer.run({ autoCommit: false, eachBatchAutoResolve: false, eachBatch: this.opts.lag?.track('fanout', consumer, topic, eachBatch) ?? eachBatch });
    // The first join may have come before run() let seeks in: pin every partition once more.
    for (const [partition, offset] of this.positions) consumer.seek({ topic, partition, offset: offset.toString() });
    if (this.sleeping) pauseAll(consumer, topic); // a replacement consumer of a dormant fan-out stays paused
    log.info({ group: this.groupId }, 'fan-out started');
  }

  /** The next offset of `partition` not yet dispatched. */
  position(partition: number): bigint {
    const position = this.positions.get(partition);
    if (position === undefined) throw new Error(`fan-out does not know partition ${partition}`);
    return position;
  }

  /** Every partition whose position is known (all of the topic's, once started). */
  partitions(): number[] {
    return [...this.positions.keys()];
  }

  health(): ConsumerHealth {
    return this.supervised.health();
  }

  /** The tail window may answer reads: the consumer is running and was heard from recently (else readers go to MongoDB). */
  tailUsable(): boolean {
    if (this.sleeping) return false;
    const health = this.supervised.health();
    return health.alive && health.silentMs < Math.min(this.opts.tailSilenceMs ?? 5000, this.opts.stallMs ?? 60_000);
  }

  /** Consumers replaced because they stalled. */
  get replaced(): number {
    return this.supervised.replaced;
  }

  async stop(): Promise<void> {
    if (this.dormancyTimer) clearInterval(this.dormancyTimer);
    const wasRunning = this.supervised.consumer !== null;
    await this.supervised.stop();
    if (!wasRunning) return;
    // The group held only this process and committed nothing: remove it so groups do not pile up.
    const admin = this.opts.kafka.admin();
    try {
      await admin.connect();
      await admin.deleteGroups([this.groupId]);
    } catch (err) {
      this.opts.log.debug({ err, group: this.groupId }, 'could not delete the fan-out group');
    } finally {
      await admin.disconnect().catch(() => undefined);
    }
  }

  /**
   * A (re)join: the group commits nothing, so kafkajs would resume each
   * partition at its end. Seek every assigned partition to P right away
   * (applied before the next fetch); then, for a partition whose P the broker
   * no longer has, fill the gap from MongoDB (a quiet partition brings no
   * batch that would reveal it).
   */
  private onJoin(consumer: Consumer, assigned: number[]): void {
    this.joins += 1;
    const { topic, log } = this.opts;
    for (const partition of assigned) {
      const position = this.positions.get(partition);
      if (position !== undefined) consumer.seek({ topic, partition, offset: position.toString() });
    }
    if (this.sleeping) pauseAll(consumer, topic);
    log.info({ group: this.groupId, partitions: assigned, joins: this.joins }, 'fan-out joined its group; resuming every partition at its own position');
    void this.lowWatermarks()
      .then((lows) => {
        for (const partition of assigned) {
          const low = lows.get(partition);
          if (low === undefined) continue;
          void this.inLane(partition, async () => {
            if (this.position(partition) >= low || this.supervised.consumer !== consumer) return;
            await this.fillFromStore(partition, low, () => this.supervised.consumer === consumer);
            consumer.seek({ topic, partition, offset: this.position(partition).toString() });
          }).catch((err: unknown) => log.error({ err, partition }, 'fan-out could not fill a gap from MongoDB'));
        }
      })
      .catch((err: unknown) => log.warn({ err }, 'fan-out could not read the low watermarks after joining'));
  }

  private handleBatch(consumer: Consumer, payload: EachBatchPayload): Promise<void> {
    return this.inLane(payload.batch.partition, () => this.dispatchBatch(consumer, payload));
  }

  private async dispatchBatch(consumer: Consumer, { batch, resolveOffset, heartbeat, isRunning, isStale }: EachBatchPayload): Promise<void> {
    const { partition } = batch;
    for (const message of batch.messages) {
      const offset = BigInt(message.offset);
      if (!this.positions.has(partition)) this.positions.set(partition, offset); // a partition unknown at startup
      const next = this.position(partition);
      if (offset < next) {
        resolveOffset(message.offset); // already dispatched
        continue;
      }
      if (offset > next) {
        // The consumer is ahead of P (reset to the end by a join whose seek came late, or out of range).
        const low = (await this.lowWatermarks()).get(partition) ?? 0n;
        if (next < low) {
          const until = low < offset ? low : offset;
          const current = (): boolean => this.supervised.consumer === consumer && isRunning() && !isStale();
          if (!(await this.fillFromStore(partition, until, current, heartbeat))) return;
        }
        if (this.position(partition) < offset) {
          consumer.seek({ topic: this.opts.topic, partition, offset: this.position(partition).toString() });
          return;
        }
      }
      // The slice of this turn of the loop is spent (by any partition's batch): wait for the next.
      // P counts every offset dispatched so far: a reader arriving meanwhile sees a consistent head.
      while (this.woken >= (this.opts.wakeSlice ?? WAKE_SLICE)) {
        await this.nextTurn();
        if (!isRunning() || isStale()) return;
      }
      if (message.headers?.[TRACEPARENT_HEADER] && tracingOn()) this.noteTrace(message);
      const traced = tracingLiveSteps();
      if (traced) liveStep({ step: 'fanout.batch', value: message.value, kafkaTs: Number(message.timestamp) });
      this.woken += this.dispatch(partition, offset, message.key, message.value);
      if (traced) liveStep({ step: 'fanout.dispatched', value: message.value });
      this.positions.set(partition, offset + 1n);
      resolveOffset(message.offset);
    }
  }

  /**
   * Dispatches the stored events of [P, until) in order and moves P to
   * `until`: those offsets are gone from the broker. Waits for the
   * materializer to have stored them (watermark at least until - 1), however
   * long that takes: this partition's waiters wait rather than miss events.
   * False when `current` says this consumer no longer owns the work.
   */
  private async fillFromStore(partition: number, until: bigint, current: () => boolean, heartbeat?: () => Promise<void>): Promise<boolean> {
    const { history, log } = this.opts;
    const from = this.position(partition);
    log.warn({ partition, from: from.toString(), until: until.toString() }, 'fan-out position is below what the broker still has; filling the gap from MongoDB');
    while (!(await history.waitForWatermark(partition, until - 1n, 2000))) {
      if (!current()) return false;
      await heartbeat?.();
    }
    let next = from;
    while (next < until) {
      const page = await history.readPartition(partition, next, until, GAP_PAGE);
      for (const stored of page) {
        const offset = stored.position.offset;
        this.recent.note(partition, stored.accountId, offset);
        if (this.opts.registry.hasAccount(stored.accountId)) this.opts.registry.dispatch(stored.accountId, stored);
        this.positions.set(partition, offset + 1n);
      }
      if (page.length < GAP_PAGE) break;
      next = this.position(partition);
      await heartbeat?.();
    }
    // Offsets without a stored event (not an event envelope) are known to hold nothing for anyone.
    this.positions.set(partition, until);
    // The filled events were not appended to the window: it starts again at P.
    this.tail.reset(partition, until);
    log.info({ partition, from: from.toString(), until: until.toString() }, 'fan-out filled a gap from MongoDB');
    return true;
  }

  private async lowWatermarks(): Promise<Map<number, bigint>> {
    const admin = this.opts.kafka.admin();
    await admin.connect();
    try {
      return new Map((await admin.fetchTopicOffsets(this.opts.topic)).map((o) => [o.partition, BigInt(o.low)]));
    } finally {
      await admin.disconnect().catch(() => undefined);
    }
  }

  private inLane(partition: number, work: () => Promise<void>): Promise<void> {
    const run = (this.lanes.get(partition) ?? Promise.resolve()).then(work);
    this.lanes.set(partition, run.catch(() => undefined));
    return run;
  }

  /** Resolves in the next turn of the event loop, with that turn's slice unspent. */
  private nextTurn(): Promise<void> {
    this.turn ??= new Promise((resolve) =>
      setImmediate(() => {
        this.turn = null;
        this.woken = 0;
        resolve();
      }),
    );
    return this.turn;
  }

  /** Notes the record's trace under its event id (tracing on, the record carries a `traceparent`). */
  private noteTrace(message: KafkaMessage): void {
    const traceparent = message.headers?.[TRACEPARENT_HEADER];
    if (!this.opts.traces || !message.key || !message.value || (typeof traceparent !== 'string' && !Buffer.isBuffer(traceparent))) return;
    const id = peekEnvelopeId(message.value.toString('utf8'), message.key.toString('utf8'));
    if (id !== null) this.opts.traces.note(id, traceparent);
  }

  /** Dispatches one record (to the tail window and its account's waiters); how many waiters it woke. */
  private dispatch(partition: number, offset: bigint, key: Buffer | null, value: Buffer | null): number {
    const { registry } = this.opts;
    const account = key ? key.toString('utf8') : null;
    if (account === null) this.recent.reset(partition, offset + 1n); // not keyed by account: it could be anyone's
    else this.recent.note(partition, account, offset);
    const waited = account !== null && registry.hasAccount(account);
    if (!waited) {
      if (!this.tail.enabled) return 0;
      // Nobody here waits for it: kept as its text, parsed only if a read reaches it (tail-window.ts).
      if (account !== null && value) {
        const text = value.toString('utf8');
        const id = peekEnvelopeId(text, account);
        if (id !== null) {
          this.tail.appendText(partition, offset, account, id, text, value.length);
          return 0;
        }
      }
    }
    const envelope = decodeEnvelope(value);
    if (!envelope) {
      this.tail.skip(partition, offset); // the materializer stores nothing for it either
      return 0;
    }
    const position = { partition, offset };
    const event = { position, record: toRecord(envelope, position), size: value?.length ?? 0 };
    // Under the envelope's account, as the materializer stores it. The waiters and the window share the object.
    this.tail.append(envelope.account_id, event);
    return waited ? registry.dispatch(envelope.account_id, event) : 0;
  }
}

function pauseAll(consumer: Consumer, topic: string): void {
  try {
    consumer.pause([{ topic }]);
  } catch {
    // Not running: it fetches until the next check pauses it (costs, never correctness).
  }
}
