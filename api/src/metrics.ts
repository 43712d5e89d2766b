/**
 * Every Prometheus metric of the API process, on one registry per app (built
 * with the deps). Served at GET /metrics; docs/operations.md lists them.
 */
import { withTimeout } from '#shared/timeout.js';
import { ConsumerLag, Counter, Gauge, Histogram, createRegistry, type Registry } from '#shared/metrics.js';

/** Up to 60 s: long-polls last up to 55 s and streams about 50 s, and they are requests too. */
const HTTP_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
const LAG_SAMPLE_TIMEOUT_MS = 1000;

/** What the materializer-lag gauge reads at scrape time (wired to the event log runtime in deps.ts). */
export interface MaterializerView {
  /** Partitions of the topic, as this process's fan-out knows them. */
  partitions(): number[];
  /** The next offset of the partition this process has seen the log reach. */
  endOffset(partition: number): bigint;
  /** Re-reads the partition's watermark from MongoDB (may fail or be slow: bounded by the caller). */
  refreshWatermark(partition: number): Promise<unknown>;
  /** The highest watermark this process knows (last offset in MongoDB; -1 for none). */
  knownWatermark(partition: number): bigint;
}

export interface ApiMetrics {
  registry: Registry;
  httpRequests: Counter<'method' | 'route' | 'status_code'>;
  httpDuration: Histogram<'method' | 'route' | 'status_class'>;
  eventsIngested: Counter<'type'>;
  /** Events the store refused again and again, kept in dead_events (alert on any). */
  eventsDeadLettered: Counter<'partition'>;
  openLongPolls: Gauge;
  openStreams: Gauge;
  consumerLag: ConsumerLag;
  /** Connects the materializer-lag gauge to the event log; until then it reports nothing. */
  watchMaterializer(view: MaterializerView): void;
}

export function createApiMetrics(): ApiMetrics {
  const registry = createRegistry();
  const registers = [registry];
  let view: MaterializerView | null = null;

  new Gauge({
    name: 'materializer_lag_events',
    help: 'Events in the partition that this process has seen in the log but that are not in MongoDB yet (log end seen minus materialized watermark), read at scrape time',
    labelNames: ['partition'],
    registers,
    async collect() {
      if (!view) return;
      const v = view;
      await Promise.all(
        v.partitions().map(async (partition) => {
          // A MongoDB that does not answer leaves the last known watermark: a lower bound, so the lag shown is never too small.
          await withTimeout(v.refreshWatermark(partition), LAG_SAMPLE_TIMEOUT_MS, () => new Error('timed out')).catch(() => undefined);
          const lag = v.endOffset(partition) - 1n - v.knownWatermark(partition);
          this.set({ partition: String(partition) }, Number(lag > 0n ? lag : 0n));
        }),
      );
    },
  });

  return {
    registry,
    httpRequests: new Counter({
      name: 'http_requests_total',
      help: 'HTTP requests answered, by method, route template (`unmatched` when no route matched) and status code',
      labelNames: ['method', 'route', 'status_code'],
      registers,
    }),
    httpDuration: new Histogram({
      name: 'http_request_duration_seconds',
      help: 'Time from request to the end of the response (long-polls and streams included), by method, route template and status class',
      labelNames: ['method', 'route', 'status_class'],
      buckets: HTTP_BUCKETS,
      registers,
    }),
    eventsIngested: new Counter({
      name: 'events_ingested_total',
      help: 'Events acknowledged by Kafka after ingest or a webhook ping, by event type',
      labelNames: ['type'],
      registers,
    }),
    eventsDeadLettered: new Counter({
      name: 'events_dead_lettered_total',
      help: 'Events MongoDB refused again and again, stored in dead_events and served without data (data_unavailable), by partition: alert on any',
      labelNames: ['partition'],
      registers,
    }),
    openLongPolls: new Gauge({ name: 'long_polls_open', help: 'Long-polls waiting in this process (HTTP and the MCP wait_for_event tool)', registers }),
    openStreams: new Gauge({ name: 'streams_open', help: 'Server-sent event streams open in this process', registers }),
    consumerLag: new ConsumerLag(registry),
    watchMaterializer(next) {
      view = next;
    },
  };
}
