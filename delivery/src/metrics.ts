/**
 * Every Prometheus metric of the delivery process, and the small HTTP server
 * that exposes them (GET /metrics on METRICS_PORT; no other route). docs/operations.md
 * lists them.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Logger } from '#shared/log.js';
import { isGiveUp, type AttemptRecord } from './deliveries.js';
import { giveUpReason, type GiveUpReason } from './retry-policy.js';
import { ConsumerLag, Counter, Gauge, Histogram, createRegistry, metricsAuthorizer, type Registry } from '#shared/metrics.js';

/** An attempt times out at 4 s; the buckets resolve that range finely. */
const ATTEMPT_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 4, 5];

/** What became of a delivery after an attempt. */
type AttemptResult = 'succeeded' | 'retry_scheduled' | 'failed';

export interface DeliveryMetrics {
  registry: Registry;
  attempts: Counter<'outcome' | 'result'>;
  attemptDuration: Histogram<'outcome'>;
  /** Deliveries given up for good, by reason (exhausted, permanent, subscription_disabled). */
  givenUp: Counter<'reason'>;
  retryQueueDepth: Gauge;
  pending: Gauge;
  /** Disabled subscriptions by reason (manual, endpoint_failing), over all processes; sampled from MongoDB. */
  subscriptionsDisabled: Gauge<'reason'>;
  /** Subscriptions this process disabled because every attempt failed for WEBHOOK_DISABLE_AFTER. */
  endpointsDisabled: Counter;
  consumerLag: ConsumerLag;
  /** Attempts running in this process right now, read at scrape time. */
  watchInFlight(read: () => number): void;
}

export function createDeliveryMetrics(): DeliveryMetrics {
  const registry = createRegistry();
  const registers = [registry];
  let inFlight: (() => number) | null = null;
  new Gauge({
    name: 'webhook_attempts_in_flight',
    help: 'Delivery attempts being sent by this process right now',
    registers,
    collect() {
      if (inFlight) this.set(inFlight());
    },
  });
  return {
    registry,
    attempts: new Counter({
      name: 'webhook_delivery_attempts_total',
      help: 'Delivery attempts sent by this process, by outcome (ok, timeout, dns, connect, tls, http_3xx, http_4xx, http_5xx, blocked_address) and what became of the delivery (succeeded, retry_scheduled, failed = gave up)',
      labelNames: ['outcome', 'result'],
      registers,
    }),
    attemptDuration: new Histogram({
      name: 'webhook_delivery_attempt_duration_seconds',
      help: 'Time from sending an attempt to its outcome (the receiver\'s answer, a timeout at 4 s, or a connection failure), by outcome',
      labelNames: ['outcome'],
      buckets: ATTEMPT_BUCKETS,
      registers,
    }),
    givenUp: new Counter({
      name: 'webhook_deliveries_given_up_total',
      help: 'Deliveries this process gave up for good, by reason: exhausted (the retry schedule ran out), permanent (a failure no retry could cure: blocked address, certificate for another name or untrusted, 410) or subscription_disabled (its subscription was disabled while it waited). POST …/recover queues them again',
      labelNames: ['reason'],
      registers,
    }),
    retryQueueDepth: new Gauge({
      name: 'webhook_retry_queue_depth',
      help: 'Pending deliveries whose next attempt is due now (including those being attempted), over all delivery processes; sampled from MongoDB',
      registers,
    }),
    pending: new Gauge({
      name: 'webhook_deliveries_pending',
      help: 'Pending deliveries (due now or scheduled for a later retry), over all delivery processes; sampled from MongoDB',
      registers,
    }),
    subscriptionsDisabled: new Gauge({
      name: 'webhook_subscriptions_disabled',
      help: 'Disabled subscriptions by reason: manual (PATCH enabled:false) or endpoint_failing (every attempt failed for WEBHOOK_DISABLE_AFTER); sampled from MongoDB',
      labelNames: ['reason'],
      registers,
    }),
    endpointsDisabled: new Counter({
      name: 'webhook_endpoints_disabled_total',
      help: 'Subscriptions this process disabled because every attempt to them failed for WEBHOOK_DISABLE_AFTER',
      registers,
    }),
    consumerLag: new ConsumerLag(registry),
    watchInFlight(read) {
      inFlight = read;
    },
  };
}

/** Counts one sent attempt by its outcome and by what became of its delivery. */
export function countAttempt(metrics: DeliveryMetrics, attempt: AttemptRecord): void {
  const result: AttemptResult = attempt.outcome === 'ok' ? 'succeeded' : isGiveUp(attempt) ? 'failed' : 'retry_scheduled';
  metrics.attempts.inc({ outcome: attempt.outcome, result });
  if (result === 'failed') countGivenUp(metrics, giveUpReason(attempt));
  metrics.attemptDuration.observe({ outcome: attempt.outcome }, attempt.durationMs / 1000);
}

/** Counts one delivery given up for good. */
export function countGivenUp(metrics: DeliveryMetrics, reason: GiveUpReason): void {
  metrics.givenUp.inc({ reason });
}

interface QueueCounts {
  due: number;
  pending: number;
  /** Disabled subscriptions by reason. */
  disabled?: Record<string, number>;
}

/**
 * Samples the queue gauges every `intervalMs` (two indexed counts), not at
 * scrape time, so a scrape never waits on MongoDB. A failed sample keeps the
 * last values and is logged at debug. Returns the stop function.
 */
export function startQueueSampler(metrics: DeliveryMetrics, count: () => Promise<QueueCounts>, intervalMs: number, log: Logger): () => Promise<void> {
  let running: Promise<void> = Promise.resolve();
  const sample = (): void => {
    running = count()
      .then(({ due, pending, disabled }) => {
        metrics.retryQueueDepth.set(due);
        metrics.pending.set(pending);
        for (const [reason, n] of Object.entries(disabled ?? {})) metrics.subscriptionsDisabled.set({ reason }, n);
      })
      .catch((err: unknown) => log.debug({ err }, 'could not sample the delivery queue'));
  };
  sample();
  const timer = setInterval(() => {
    void running.then(sample);
  }, intervalMs);
  timer.unref();
  return async () => {
    clearInterval(timer);
    await running;
  };
}

interface MetricsServer {
  /** The bound URL, e.g. http://127.0.0.1:9464 */
  url: string;
  close(): Promise<void>;
}

/**
 * GET /metrics on its own port (METRICS_TOKEN as bearer when set) and GET
 * /readyz (open, no detail: 200, or 503 while the consumer is dead and not
 * yet replaced); anything else is a JSON 404.
 */
export async function startMetricsServer(opts: { registry: Registry; host: string; port: number; token: string | null; log: Logger; ready?: () => boolean }): Promise<MetricsServer> {
  const authorized = metricsAuthorizer(opts.token);
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const send = (status: number, type: string, body: string, headers: Record<string, string> = {}): void => {
      res.writeHead(status, { 'Content-Type': type, 'Cache-Control': 'no-store', ...headers }).end(body);
    };
    const error = (status: number, code: string, message: string, headers: Record<string, string> = {}): void =>
      send(status, 'application/json', JSON.stringify({ error: { code, message, request_id: '' } }), headers);
    if (path === '/readyz' && opts.ready && (req.method === 'GET' || req.method === 'HEAD')) {
      return opts.ready() ? send(200, 'application/json', JSON.stringify({ status: 'ready' })) : error(503, 'unavailable', 'The delivery consumer is not running', { 'Retry-After': '5' });
    }
    if (path !== '/metrics') return error(404, 'not_found', `No route for ${req.method} ${path}`);
    if (req.method !== 'GET' && req.method !== 'HEAD') return error(405, 'method_not_allowed', 'Only GET', { Allow: 'GET, HEAD' });
    if (!authorized(req.headers.authorization)) return error(401, 'unauthorized', 'A valid metrics token is required', { 'WWW-Authenticate': 'Bearer' });
    opts.registry.metrics().then(
      (text) => send(200, opts.registry.contentType, req.method === 'HEAD' ? '' : text),
      (err: unknown) => {
        opts.log.warn({ err }, 'could not collect metrics');
        error(500, 'internal', 'Internal server error');
      },
    );
  });
  server.keepAliveTimeout = 65_000; // above Prometheus' usual scrape interval
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const url = `http://${opts.host.includes(':') ? `[${opts.host}]` : opts.host}:${port}`;
  opts.log.info({ url: `${url}/metrics` }, 'metrics listening');
  return {
    url,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
  };
}
