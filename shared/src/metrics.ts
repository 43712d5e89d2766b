/**
 * Prometheus building blocks both processes use: a registry with the default
 * process metrics, the Kafka consumer-lag gauge fed from kafkajs batches, and
 * the optional bearer check of the /metrics endpoints. Each process defines
 * its own metrics in its own module (api/src/metrics.ts,
 * delivery/src/metrics.ts) on its own registry, so two apps in one test
 * process never share counters.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import type { Consumer, EachBatchPayload } from './eventlog/kafka.js';

export { Counter, Gauge, Histogram, Registry } from 'prom-client';

/** A registry with Node's process metrics (CPU, memory, event-loop lag, GC, handles). */
export function createRegistry(): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return registry;
}

/** `2xx`, `4xx`, …: a histogram label that stays small where the exact code would multiply buckets. */
export function statusClass(status: number): string {
  return `${Math.floor(status / 100)}xx`;
}

/**
 * `kafka_consumer_lag{consumer, partition}`: messages in a partition after the
 * last one this process's consumer handled, computed from the high watermark
 * kafkajs reports with every batch. Only the partitions a consumer owns are
 * reported (a rebalance removes the others), so summing over pods counts each
 * partition once per consumer group.
 */
export class ConsumerLag {
  private readonly gauge: Gauge<'consumer' | 'partition'>;
  private readonly owned = new Map<string, Set<number>>();
  private readonly highWatermarks = new Map<number, bigint>();

  constructor(registry: Registry) {
    this.gauge = new Gauge({
      name: 'kafka_consumer_lag',
      help: 'Messages in the partition after the last one this consumer handled (high watermark minus next offset), as of its last batch',
      labelNames: ['consumer', 'partition'],
      registers: [registry],
    });
  }

  /**
   * Wraps an eachBatch handler: after it returns (or throws), the lag is the
   * batch's high watermark minus the offset after the last one the handler
   * resolved. Registers a group-join listener that drops partitions no longer
   * assigned to this member.
   */
  track(name: string, consumer: Consumer, topic: string, handler: (payload: EachBatchPayload) => Promise<void>): (payload: EachBatchPayload) => Promise<void> {
    consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => this.keepOnly(name, payload.memberAssignment[topic] ?? []));
    return async (payload) => {
      const { batch } = payload;
      let resolved: string | null = null;
      const resolveOffset = (offset: string): void => {
        resolved = offset;
        payload.resolveOffset(offset);
      };
      try {
        await handler({ ...payload, resolveOffset });
      } finally {
        const high = BigInt(batch.highWatermark);
        const first = batch.firstOffset();
        const next = resolved !== null ? BigInt(resolved) + 1n : first !== null ? BigInt(first) : high;
        this.record(name, batch.partition, high, next);
      }
    };
  }

  /** The highest high watermark any tracked consumer of this process has seen for the partition. */
  highWatermark(partition: number): bigint | undefined {
    return this.highWatermarks.get(partition);
  }

  private record(name: string, partition: number, high: bigint, next: bigint): void {
    const seen = this.highWatermarks.get(partition);
    if (seen === undefined || high > seen) this.highWatermarks.set(partition, high);
    let owned = this.owned.get(name);
    if (!owned) this.owned.set(name, (owned = new Set()));
    owned.add(partition);
    this.gauge.set({ consumer: name, partition: String(partition) }, Number(high > next ? high - next : 0n));
  }

  private keepOnly(name: string, assigned: number[]): void {
    const owned = this.owned.get(name);
    if (!owned) return;
    const keep = new Set(assigned);
    for (const partition of owned) {
      if (keep.has(partition)) continue;
      owned.delete(partition);
      this.gauge.remove({ consumer: name, partition: String(partition) });
    }
  }
}

const digest = (value: string): Buffer => createHash('sha256').update(value, 'utf8').digest();

/**
 * The check in front of /metrics: with no token configured, anyone who can
 * reach the port may scrape; with METRICS_TOKEN, only `Authorization: Bearer
 * <token>` (compared in constant time).
 */
export function metricsAuthorizer(token: string | null): (authorization: string | undefined) => boolean {
  if (token === null) return () => true;
  const expected = digest(token);
  return (authorization) => {
    const match = /^Bearer +(\S+) *$/i.exec(authorization ?? '');
    return match !== null && timingSafeEqual(digest(match[1] as string), expected);
  };
}
