/**
 * The fan-out consumer: every API process reads every partition (its own
 * group, committing nothing) and hands each event to this process's waiters
 * of that account. It pins where it starts: the end offsets read at startup,
 * sought right after joining, so the fan-out position P of every partition
 * (the next offset not yet dispatched) is known from the first moment and
 * only moves forward one offset at a time.
 */
import { randomBytes } from 'node:crypto';
import { decodeEnvelope, toRecord } from '../../../../shared/src/eventlog/envelope.js';
import { createConsumer, endOffsets, type Consumer, type EachBatchPayload, type Kafka } from '../../../../shared/src/eventlog/kafka.js';
import type { Logger } from '../../../../shared/src/log.js';
import type { ConsumerLag } from '../../../../shared/src/metrics.js';
import { RecentAccounts } from './recent-accounts.js';
import type { WaiterRegistry } from './waiters.js';

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
}

export class FanOut {
  readonly groupId: string;
  private readonly positions = new Map<number, bigint>();
  /** The position a gap was last repaired from, per partition, so a repair is tried once. */
  private readonly repairs = new Map<number, bigint>();
  private consumer: Consumer | null = null;
  /** Which accounts had events among the offsets dispatched (lets a resuming feed skip MongoDB). */
  readonly recent: RecentAccounts;

  constructor(private readonly opts: FanOutOptions) {
    this.recent = new RecentAccounts(opts.recentAccountsPerPartition ?? 20_000);
    this.groupId = `${opts.groupPrefix}.${opts.instanceId}.${randomBytes(3).toString('hex')}`;
  }

  async start(): Promise<void> {
    const { kafka, topic, log } = this.opts;
    const admin = kafka.admin();
    await admin.connect();
    try {
      for (const [partition, offset] of await endOffsets(admin, topic)) {
        this.positions.set(partition, offset);
        this.recent.reset(partition, offset);
      }
    } finally {
      await admin.disconnect();
    }
    const consumer = createConsumer(kafka, this.groupId);
    this.consumer = consumer;
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: false });
    const eachBatch = (payload: EachBatchPayload): Promise<void> => this.handleBatch(payload);
    await consumer.run({ autoCommit: false, eachBatchAutoResolve: false, eachBatch: this.opts.lag?.track('fanout', consumer, topic, eachBatch) ?? eachBatch });
    for (const [partition, offset] of this.positions) consumer.seek({ topic, partition, offset: offset.toString() });
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

  async stop(): Promise<void> {
    const consumer = this.consumer;
    this.consumer = null;
    if (!consumer) return;
    await consumer.disconnect();
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

  private async handleBatch({ batch, resolveOffset }: EachBatchPayload): Promise<void> {
    const { partition } = batch;
    for (const message of batch.messages) {
      const offset = BigInt(message.offset);
      const next = this.positions.get(partition) ?? offset;
      if (offset < next) {
        resolveOffset(message.offset); // already dispatched
        continue;
      }
      if (offset > next && this.repairGap(partition, next, offset)) return;
      this.dispatch(partition, offset, message.key, message.value);
      this.positions.set(partition, offset + 1n);
      resolveOffset(message.offset);
    }
  }

  /**
   * The consumer jumped ahead of P (the pin was not applied yet, or the group
   * was re-created after a long stall and reset to the end). Seek back once;
   * if the broker still starts later, those offsets no longer exist.
   */
  private repairGap(partition: number, next: bigint, offset: bigint): boolean {
    if (this.repairs.get(partition) !== next && this.consumer) {
      this.repairs.set(partition, next);
      this.consumer.seek({ topic: this.opts.topic, partition, offset: next.toString() });
      return true;
    }
    this.opts.log.error({ partition, from: next.toString(), to: offset.toString() }, 'fan-out skipped offsets the broker no longer has');
    this.recent.reset(partition, offset); // nothing is known of the skipped offsets
    return false;
  }

  private dispatch(partition: number, offset: bigint, key: Buffer | null, value: Buffer | null): void {
    const { registry } = this.opts;
    if (!key) {
      this.recent.reset(partition, offset + 1n); // not keyed by account: it could be anyone's
      return;
    }
    const account = key.toString('utf8');
    this.recent.note(partition, account, offset);
    if (!registry.hasAccount(account)) return;
    const envelope = decodeEnvelope(value);
    if (!envelope) return;
    const position = { partition, offset };
    registry.dispatch(envelope.account_id, { position, record: toRecord(envelope, position), size: value?.length ?? 0 });
  }
}
