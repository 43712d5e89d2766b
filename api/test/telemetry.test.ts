/**
 * Tracing end to end, in-process, with the SDK's in-memory exporter: one event
 * ingested through the API, delivered (a failed attempt, then its retry) by a
 * delivery process, and returned to a long-poll. The ingest request, its publish,
 * both attempts and the read are one trace (the read linked to it); the delivery
 * kept for the retry holds the Kafka record's traceparent; the read's request
 * log line carries its trace_id.
 */
import { Writable } from 'node:stream';
import { expect } from 'chai';
import { context, propagation, SpanKind, trace } from '@opentelemetry/api';
import { NodeSDK } from '@opentelemetry/sdk-node';
import { InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { MongoClient } from 'mongodb';
import { createLogger } from '#shared/log.js';
import type { DeliveryDoc } from '#shared/mongo/index.js';
import { setTracing } from '#shared/telemetry.js';
import { atFileEnd } from '#test-support/cleanup.js';
import { baseTestEnv } from '#test-support/env.js';
import { failTimes, Receiver } from '#test-support/receiver.js';
import { deliveryTestEnv, startTestDelivery, waitForGroup } from '../../delivery/test/support/delivery.js';
import { createDeps } from '../src/deps.js';
import { startApi, type RunningApi } from '../src/server.js';
import { bearer, createAccount } from './support/accounts.js';
import { call, checkResponses, testApiConfig } from './support/api.js';
import { eventually } from './support/events.js';
import { webhookTestEnv } from './support/webhooks.js';

describe('tracing (OpenTelemetry, in-memory exporter)', function () {
  this.timeout(60_000);
  const exporter = new InMemorySpanExporter();
  const lines: Record<string, unknown>[] = [];
  let sdk: NodeSDK;
  let api: RunningApi;
  let receiver: Receiver;
  let db: MongoClient;

  before(async function () {
    this.timeout(120_000);
    sdk = new NodeSDK({ spanProcessors: [new SimpleSpanProcessor(exporter)], instrumentations: [], metricReaders: [], logRecordProcessors: [] });
    sdk.start();
    setTracing(true);
    receiver = await Receiver.start();
    const config = testApiConfig({ ...webhookTestEnv(), INSTANCE_ID: 'test-tracing', WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' });
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const line of chunk.toString('utf8').split('\n')) if (line) lines.push(JSON.parse(line) as Record<string, unknown>);
        done();
      },
    });
    api = await startApi(config, { deps: createDeps(config, { log: createLogger('api', 'info', sink) }) });
    atFileEnd(() => api.close());
    checkResponses(api);
    const env = deliveryTestEnv(receiver.caFile, webhookTestEnv());
    await startTestDelivery(env);
    await waitForGroup(env);
    db = new MongoClient(baseTestEnv().MONGO_URL!);
    atFileEnd(() => db.close());
  });

  after(async () => {
    await receiver.close();
    setTracing(false);
    await sdk.shutdown();
    // Leave no global provider behind for the files that run next in this process.
    trace.disable();
    context.disable();
    propagation.disable();
  });

  it('follows one event from the ingest request through Kafka to each delivery attempt and to the long-poll that returned it', async () => {
    const acct = await createAccount(api.url);
    const path = '/traced';
    receiver.on(path, failTimes(1));
    const sub = await call(api.url, 'POST', '/api/v1/webhooks', { headers: bearer(acct.apiKey), body: { url: receiver.url(path), events: ['*'] } });
    expect(sub.status, JSON.stringify(sub.body)).to.equal(201);

    const poll = call(api.url, 'POST', '/api/v1/events/wait', { headers: bearer(acct.apiKey), body: { timeout_ms: 30_000 } });
    await new Promise((r) => setTimeout(r, 300)); // the long-poll is parked before the event lands
    const ingested = await call(api.url, 'POST', '/internal/v1/events', { headers: bearer(api.deps.config.ingestToken), body: { account_id: acct.userId, type: 'call.started', data: {} } });
    expect(ingested.status, JSON.stringify(ingested.body)).to.equal(202);
    const eventId = ingested.body.events[0].id as string;
    const read = await poll;
    expect(read.body.event?.id).to.equal(eventId);
    await receiver.waitFor(path, 2, 30_000); // the failed attempt and its retry

    const spans = (): ReadableSpan[] => exporter.getFinishedSpans();
    const byName = (name: string): ReadableSpan[] => spans().filter((s) => s.name === name);
    // The retry's span is written once its attempt is over (right after the receiver saw it).
    await eventually(async () => (byName('webhook attempt').filter((s) => s.attributes['event_platform.event_id'] === eventId).length >= 2 ? true : undefined), 10_000);

    const ingest = byName('POST /internal/v1/events').find((s) => s.kind === SpanKind.SERVER);
    expect(ingest, 'the ingest request span').to.not.equal(undefined);
    const traceId = ingest!.spanContext().traceId;
    const publish = spans().find((s) => s.kind === SpanKind.PRODUCER && s.spanContext().traceId === traceId);
    expect(publish, 'the publish span, a child of the ingest request').to.not.equal(undefined);
    expect(publish!.parentSpanContext?.spanId).to.equal(ingest!.spanContext().spanId);
    expect(publish!.attributes['event_platform.event_ids']).to.deep.equal([eventId]);

    // Each attempt: a child of the publish, so its trace came through the Kafka record's header.
    const attempts = byName('webhook attempt').filter((s) => s.attributes['event_platform.event_id'] === eventId);
    expect(attempts.map((s) => s.attributes['event_platform.attempt']).sort()).to.deep.equal([1, 2]);
    expect(attempts.map((s) => s.attributes['event_platform.outcome']).sort()).to.deep.equal(['http_5xx', 'ok']);
    for (const a of attempts) {
      expect(a.spanContext().traceId).to.equal(traceId);
      expect(a.parentSpanContext?.spanId).to.equal(publish!.spanContext().spanId);
    }
    // The retry went through the store: the delivery there holds the record's traceparent.
    const stored = await db.db(webhookTestEnv().MONGO_DB).collection<DeliveryDoc>('deliveries').findOne({ event_id: eventId });
    expect(stored?.traceparent).to.equal(`00-${traceId}-${publish!.spanContext().spanId}-01`);

    // The read: its own request span, linked to the event's trace.
    const wait = byName('POST /api/v1/events/wait').find((s) => s.links.some((l) => l.context.traceId === traceId));
    expect(wait, 'the long-poll span linked to the event').to.not.equal(undefined);
    expect(wait!.links.find((l) => l.context.traceId === traceId)?.attributes?.['event_platform.event_id']).to.equal(eventId);
    // Its request log line carries its trace id.
    const logged = lines.find((l) => l.msg === 'request' && l.path === '/api/v1/events/wait' && l.trace_id === wait!.spanContext().traceId);
    expect(logged, 'the long-poll request log line with its trace_id').to.not.equal(undefined);
  });
});
