/**
 * The delivery process's metrics endpoint (METRICS_PORT) against real Kafka,
 * the real Mongo server and a real HTTPS receiver, on its own topic and
 * database so the queue gauges count only this test's deliveries.
 */
import { expect } from 'chai';
import { createRegistry } from '#shared/metrics.js';
import { createLogger } from '#shared/log.js';
import { baseTestEnv } from '#test-support/env.js';
import { metricNames, parseMetrics, sampleValue, type Sample } from '#test-support/prometheus.js';
import { Receiver, status } from '#test-support/receiver.js';
import { eventually, freePort } from '#test-support/wait.js';
import { startMetricsServer } from '../src/metrics.js';
import type { RunningDelivery } from '../src/worker.js';
import { deliveryTestEnv, envelope, newAccountId, startTestDelivery, TestDb, TestLog, waitForGroup } from './support/delivery.js';

/** The checks here wait up to 20 s unless they say otherwise, every 100 ms. */
const until = <T>(check: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> => eventually(check, timeoutMs, 100);


async function scrape(url: string, headers: Record<string, string> = {}): Promise<{ text: string; samples: Sample[] }> {
  const res = await fetch(`${url}/metrics`, { headers });
  expect(res.status).to.equal(200);
  expect(res.headers.get('content-type')).to.match(/^text\/plain; version=0\.0\.4/);
  const text = await res.text();
  return { text, samples: parseMetrics(text) };
}


describe('delivery metrics: GET /metrics on METRICS_PORT', function () {
  this.timeout(60_000);
  let receiver: Receiver;
  let worker: RunningDelivery;
  let url: string;
  let log: TestLog;
  let db: TestDb;

  before(async function () {
    this.timeout(90_000);
    receiver = await Receiver.start();
    const base = baseTestEnv();
    const env = deliveryTestEnv(receiver.caFile, {
      EVENTS_TOPIC: `${base.EVENTS_TOPIC}-dmetrics`,
      MONGO_DB: `${base.MONGO_DB}_dmetrics`,
      METRICS_PORT: String(await freePort()),
      METRICS_SAMPLE_INTERVAL_MS: '100',
    });
    worker = await startTestDelivery(env);
    await waitForGroup(env);
    url = worker.metricsUrl!;
    log = new TestLog(env);
    db = new TestDb(env);
  });
  after(async () => {
    await worker.close();
    await receiver.close();
  });

  it('answers on METRICS_PORT with the delivery and process series', async () => {
    expect(url).to.match(/^http:\/\/127\.0\.0\.1:\d+$/);
    const names = metricNames((await scrape(url)).text);
    for (const name of [
      'webhook_delivery_attempts_total',
      'webhook_delivery_attempt_duration_seconds',
      'webhook_attempts_in_flight',
      'webhook_retry_queue_depth',
      'webhook_deliveries_pending',
      'kafka_consumer_lag',
      'process_cpu_seconds_total',
      'nodejs_eventloop_lag_seconds',
    ]) {
      expect(names, name).to.include(name);
    }
    const other = await fetch(`${url}/other`);
    expect(other.status).to.equal(404);
    expect(((await other.json()) as { error: { code: string } }).error.code).to.equal('not_found');
  });

  it('counts attempts by outcome and result, and the consumer lag of the partition it read', async () => {
    receiver.on('/m-fail', status(503));
    const account = newAccountId();
    await db.subscribe(account, receiver.url('/m-ok'), ['*']);
    await db.subscribe(account, receiver.url('/m-fail'), ['*']);
    const [meta] = await log.publish([envelope(account, 'call.ended')]);

    // Schedule 1s,1s,1s: the failing receiver gets four attempts, three followed by a retry, then the delivery is given up.
    const samples = await until(async () => {
      const { samples: s } = await scrape(url);
      return sampleValue(s, 'webhook_delivery_attempts_total', { outcome: 'http_5xx', result: 'failed' }) === 1 ? s : undefined;
    }, 30_000);
    expect(sampleValue(samples, 'webhook_delivery_attempts_total', { outcome: 'ok', result: 'succeeded' })).to.equal(1);
    expect(sampleValue(samples, 'webhook_delivery_attempts_total', { outcome: 'http_5xx', result: 'retry_scheduled' })).to.equal(3);
    expect(sampleValue(samples, 'webhook_delivery_attempt_duration_seconds_count', { outcome: 'http_5xx' })).to.equal(4);
    expect(sampleValue(samples, 'kafka_consumer_lag', { consumer: 'delivery', partition: String(meta!.partition) })).to.equal(0);
    expect(receiver.received('/m-fail')).to.have.length(4);
    expect(sampleValue(samples, 'webhook_deliveries_given_up_total', { reason: 'exhausted' })).to.equal(1);
  });

  it('counts the deliveries given up by reason: a 410 at once (permanent), one whose subscription was disabled while it waited for its retry', async () => {
    receiver.on('/m-gone', status(410));
    receiver.on('/m-off', status(503, { 'Retry-After': '4' })); // its retry waits 4 s: time to disable it first
    const account = newAccountId();
    await db.subscribe(account, receiver.url('/m-gone'), ['call.started']);
    const off = await db.subscribe(account, receiver.url('/m-off'), ['call.started']);
    await log.publish([envelope(account, 'call.started')]);
    await receiver.waitFor('/m-off', 1, 20_000);
    await db.change(off._id, { enabled: false, disabled_reason: 'manual', disabled_at: new Date() });
    const samples = await until(async () => {
      const { samples: s } = await scrape(url);
      return sampleValue(s, 'webhook_deliveries_given_up_total', { reason: 'permanent' }) === 1 && sampleValue(s, 'webhook_deliveries_given_up_total', { reason: 'subscription_disabled' }) === 1 ? s : undefined;
    }, 30_000);
    expect(sampleValue(samples, 'webhook_deliveries_given_up_total', { reason: 'exhausted' })).to.equal(1); // the earlier test's, no more
    expect(receiver.received('/m-gone')).to.have.length(1);
    expect(receiver.received('/m-off')).to.have.length(1);
  });

  it('samples the pending and due deliveries from MongoDB', async () => {
    // A due delivery another (live) process holds: counted as due, left alone by this one.
    const id = `dlv_${'0'.repeat(20)}beef`;
    const deliveries = db.collection('deliveries');
    await deliveries.insertOne({ _id: id, state: 'pending', subscription_id: 'wh_none', attempts: 1, claim_seq: 1, next_attempt_at: new Date(Date.now() - 60_000), lease_owner: 'elsewhere', lease_until: new Date(Date.now() + 600_000), created_at: new Date(), updated_at: new Date() });
    try {
      await until(async () => {
        const { samples } = await scrape(url);
        return sampleValue(samples, 'webhook_retry_queue_depth') === 1 && sampleValue(samples, 'webhook_deliveries_pending') === 1 ? true : undefined;
      });
    } finally {
      await deliveries.deleteOne({ _id: id });
    }
    await until(async () => (sampleValue((await scrape(url)).samples, 'webhook_deliveries_pending') === 0 ? true : undefined));
  });

  it('with METRICS_TOKEN, serves only a scrape that brings it', async () => {
    const token = 'delivery-metrics-token-01';
    const server = await startMetricsServer({ registry: createRegistry(), host: '127.0.0.1', port: 0, token, log: createLogger('test', 'silent') });
    try {
      for (const authorization of [undefined, 'Bearer delivery-metrics-token-02', token]) {
        const res = await fetch(`${server.url}/metrics`, { headers: authorization ? { authorization } : {} });
        expect(res.status).to.equal(401);
        expect(res.headers.get('www-authenticate')).to.equal('Bearer');
      }
      const { samples } = await scrape(server.url, { authorization: `Bearer ${token}` });
      expect(samples.some((s) => s.name === 'process_cpu_seconds_total')).to.equal(true);
      expect((await fetch(`${server.url}/metrics`, { method: 'POST', headers: { authorization: `Bearer ${token}` } })).status).to.equal(405);
    } finally {
      await server.close();
    }
  });
});
