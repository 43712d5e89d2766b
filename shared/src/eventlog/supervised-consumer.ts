/**
 * A Kafka consumer with a watchdog. kafkajs restarts a crashed consumer by
 * itself, but after a broker restart we saw one such restart never come back
 * (fault test, once under heavy load): no error, no fetch, no heartbeat, its
 * partitions frozen. A live consumer fetches every 100 ms and heartbeats every
 * second, even with nothing to read; one silent for `stallMs` is dead: it is
 * disconnected and replaced by a new member of the same group, and reported
 * dead (readiness 503) until the new one is running. Used by every consumer of
 * the service: the materializer, the fan-out and the delivery consumer.
 */
import type { Consumer } from 'kafkajs';
import type { Logger } from '../log.js';

interface SupervisedConsumerOptions {
  /** What the consumer is, for logs and health reports. */
  name: string;
  groupId: string;
  log: Logger;
  /** Silence after which the consumer is replaced (default 60 s). */
  stallMs?: number;
  /** Makes a consumer, not connected (tests stand in a hung one). */
  newConsumer: () => Consumer;
  /** Connects, subscribes and runs a consumer just made (its liveness listeners are already on). */
  run: (consumer: Consumer) => Promise<void>;
  /** How long a stalled consumer's disconnect may take before it is abandoned (default 10 s). */
  disconnectTimeoutMs?: number;
}

export interface ConsumerHealth {
  name: string;
  alive: boolean;
  /** Time since the current consumer last fetched, heartbeated, joined or got a batch. */
  silentMs: number;
  replaced: number;
}

const DEFAULT_STALL_MS = 60_000;

export class SupervisedConsumer {
  private current: Consumer | null = null;
  private lastSignOfLife = Date.now();
  private watchdog: NodeJS.Timeout | null = null;
  private replacing = false;
  /** The last replacement failed to start (Kafka away): dead until one starts. */
  private failed = false;
  private stopped = false;
  /** Consumers replaced because they stalled (for tests and logs). */
  replaced = 0;

  constructor(private readonly opts: SupervisedConsumerOptions) {}

  get stallMs(): number {
    return this.opts.stallMs ?? DEFAULT_STALL_MS;
  }

  /** The running consumer (null before start, after stop). */
  get consumer(): Consumer | null {
    return this.current;
  }

  async start(): Promise<void> {
    this.stopped = false;
    this.watchdog ??= setInterval(() => void this.check(), Math.min(5000, Math.max(100, this.stallMs / 4)));
    this.watchdog.unref();
    await this.launch();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.watchdog) clearInterval(this.watchdog);
    this.watchdog = null;
    const consumer = this.current;
    this.current = null;
    await consumer?.disconnect();
  }

  /** Alive: running and heard from within `stallMs`. Dead while silent longer, or being replaced. */
  health(): ConsumerHealth {
    const silentMs = Date.now() - this.lastSignOfLife;
    return { name: this.opts.name, alive: this.current !== null && !this.replacing && !this.failed && silentMs < this.stallMs, silentMs, replaced: this.replaced };
  }

  private async launch(): Promise<void> {
    const consumer = this.opts.newConsumer();
    this.current = consumer;
    this.lastSignOfLife = Date.now();
    const alive = (): void => {
      if (this.current === consumer) this.lastSignOfLife = Date.now();
    };
    for (const event of [consumer.events.FETCH, consumer.events.HEARTBEAT, consumer.events.GROUP_JOIN, consumer.events.START_BATCH_PROCESS]) consumer.on(event, alive);
    await this.opts.run(consumer);
  }

  private async check(): Promise<void> {
    const stalled = this.current;
    if (this.replacing || this.stopped || !stalled || Date.now() - this.lastSignOfLife < this.stallMs) return;
    this.replacing = true;
    const { log, name, groupId } = this.opts;
    log.warn({ consumer: name, group: groupId, silentMs: Date.now() - this.lastSignOfLife }, `${name} consumer shows no sign of life; replacing it`);
    try {
      await Promise.race([stalled.disconnect().catch(() => undefined), sleep(this.opts.disconnectTimeoutMs ?? 10_000)]);
      if (this.current !== stalled || this.stopped) return; // stopped meanwhile
      this.replaced += 1;
      await this.launch();
      this.failed = false;
      log.info({ consumer: name, group: groupId, replaced: this.replaced }, `${name} consumer replaced`);
    } catch (err) {
      this.failed = true;
      this.lastSignOfLife = Date.now(); // Kafka still away: try again after another stallMs
      log.warn({ err, consumer: name, group: groupId }, `could not replace the ${name} consumer; will try again`);
    } finally {
      this.replacing = false;
    }
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
