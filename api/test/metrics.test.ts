import { expect } from 'chai';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { baseTestEnv } from '#test-support/env.js';
import { metricNames, parseMetrics, sampleValue, type Sample } from '#test-support/prometheus.js';
import { createApp } from '../src/app.js';
import { createDeps } from '../src/deps.js';
import type { RunningApi } from '../src/server.js';
import { bearer, createAccount } from './support/accounts.js';
import { call, startTestApi, testApiConfig } from './support/api.js';
import { eventually, fakeAccountId, ingest } from './support/events.js';
import { StreamClient } from './support/sse.js';

async function scrape(api: RunningApi | string, headers: Record<string, string> = {}): Promise<{ text: string; samples: Sample[] }> {
  const res = await fetch(`${typeof api === 'string' ? api : api.url}/metrics`, { headers });
  expect(res.status).to.equal(200);
  expect(res.headers.get('content-type')).to.match(/^text\/plain; version=0\.0\.4/);
  const text = await res.text();
  return { text, samples: parseMetrics(text) };
}

const value = async (api: RunningApi, name: string, labels: Record<string, string> = {}): Promise<number> => sampleValue((await scrape(api)).samples, name, labels) ?? 0;

describe('metrics: GET /metrics on the API', function () {
  this.timeout(60_000);
  let a: RunningApi;

  before(async function () {
    this.timeout(90_000);
    // Its own topic and database: the only API process on them, so it materializes every
    // partition and no other test's traffic moves its gauges.
    const base = baseTestEnv();
    a = await startTestApi({ EVENTS_TOPIC: `${base.EVENTS_TOPIC}-apimetrics`, MONGO_DB: `${base.MONGO_DB}_apimetrics`, INSTANCE_ID: 'test-metrics' });
  });
  after(() => a.close());

  it('exposes the process, HTTP and event-log series', async () => {
    await call(a.url, 'GET', '/healthz');
    const { text } = await scrape(a);
    const names = metricNames(text);
    for (const name of [
      'process_cpu_seconds_total',
      'process_resident_memory_bytes',
      'nodejs_eventloop_lag_seconds',
      'http_requests_total',
      'http_request_duration_seconds',
      'events_ingested_total',
      'materializer_lag_events',
      'long_polls_open',
      'streams_open',
      'kafka_consumer_lag',
    ]) {
      expect(names, name).to.include(name);
    }
  });

  it('counts ingested events by type', async () => {
    const before = await value(a, 'events_ingested_total', { type: 'call.takeover' });
    const account = fakeAccountId();
    await ingest(a, [1, 2, 3].map((i) => ({ account_id: account, type: 'call.takeover', data: { i } })));
    expect(await value(a, 'events_ingested_total', { type: 'call.takeover' })).to.equal(before + 3);
  });

  it('labels requests with the route template and status, never the raw path', async () => {
    const who = await createAccount(a.url);
    const labels = { method: 'GET', route: '/api/auth/me', status_code: '200' };
    const unmatched = { method: 'GET', route: 'unmatched', status_code: '404' };
    const byId = { method: 'GET', route: '/api/v1/webhooks/:id', status_code: '404' };
    const before = await scrape(a);
    await call(a.url, 'GET', '/api/auth/me', { headers: bearer(who.apiKey) });
    await call(a.url, 'GET', '/api/auth/me', { headers: bearer(who.token) });
    await call(a.url, 'GET', '/no/such/route-7f3a');
    await call(a.url, 'GET', '/api/v1/webhooks/wh_0000000000000000007f3a7f', { headers: bearer(who.apiKey) });
    const after = await scrape(a);
    const delta = (l: Record<string, string>): number => (sampleValue(after.samples, 'http_requests_total', l) ?? 0) - (sampleValue(before.samples, 'http_requests_total', l) ?? 0);
    expect(delta(labels)).to.equal(2);
    expect(delta(unmatched)).to.equal(1);
    expect(delta(byId)).to.equal(1);
    const histogram = { method: 'GET', route: '/api/auth/me', status_class: '2xx' };
    expect(sampleValue(after.samples, 'http_request_duration_seconds_count', histogram)).to.be.at.least(2);
    expect(sampleValue(after.samples, 'http_request_duration_seconds_bucket', { ...histogram, le: '60' })).to.be.at.least(2);
    expect(after.text).not.to.include('7f3a');
  });

  it('counts open long-polls while they wait, and not after', async () => {
    const who = await createAccount(a.url);
    const base = await value(a, 'long_polls_open');
    const waiting = call(a.url, 'POST', '/api/v1/events/wait', { headers: bearer(who.apiKey), body: { types: ['call.ended'], timeout_ms: 20_000 } });
    await eventually(async () => ((await value(a, 'long_polls_open')) === base + 1 ? true : undefined));
    await ingest(a, [{ account_id: who.userId, type: 'call.ended', data: {} }]);
    expect((await waiting).body.event.type).to.equal('call.ended');
    await eventually(async () => ((await value(a, 'long_polls_open')) === base ? true : undefined));
  });

  it('records a long-poll when it is answered, with its status and the whole wait', async () => {
    const who = await createAccount(a.url);
    const labels = { method: 'POST', route: '/api/v1/events/wait', status_code: '200' };
    const histogram = { method: 'POST', route: '/api/v1/events/wait', status_class: '2xx' };
    const count = (samples: Sample[], name: string, l: Record<string, string>): number => sampleValue(samples, name, l) ?? 0;
    const before = (await scrape(a)).samples;
    const base = await value(a, 'long_polls_open');
    const waiting = call(a.url, 'POST', '/api/v1/events/wait', { headers: bearer(who.apiKey), body: { timeout_ms: 1500 } });
    await eventually(async () => ((await value(a, 'long_polls_open')) === base + 1 ? true : undefined));
    // Waiting (its middleware chain has long returned): not counted yet.
    const during = (await scrape(a)).samples;
    expect(count(during, 'http_requests_total', labels) - count(before, 'http_requests_total', labels)).to.equal(0);
    expect((await waiting).body).to.include({ event: null, timed_out: true });
    const after = (await scrape(a)).samples;
    expect(count(after, 'http_requests_total', labels) - count(before, 'http_requests_total', labels)).to.equal(1);
    expect(count(after, 'http_request_duration_seconds_count', histogram) - count(before, 'http_request_duration_seconds_count', histogram)).to.equal(1);
    // The one observation took the whole wait: it is in the 2.5 s bucket, not in the 1 s one.
    const bucket = (samples: Sample[], le: string): number => count(samples, 'http_request_duration_seconds_bucket', { ...histogram, le });
    expect(bucket(after, '1') - bucket(before, '1')).to.equal(0);
    expect(count(after, 'http_request_duration_seconds_sum', histogram) - count(before, 'http_request_duration_seconds_sum', histogram)).to.be.at.least(1.5);
  });

  it('counts open streams while they run, and not after; the stream request once it has ended', async () => {
    const who = await createAccount(a.url);
    const base = await value(a, 'streams_open');
    const labels = { method: 'GET', route: '/api/v1/events/stream', status_code: '200' };
    const requests = await value(a, 'http_requests_total', labels);
    const token = await call(a.url, 'POST', '/api/v1/events/stream-token', { headers: bearer(who.apiKey) });
    const client = new StreamClient(new URL(token.body.stream_url, a.url).href);
    try {
      await client.until((c) => c.opens === 1);
      await eventually(async () => ((await value(a, 'streams_open')) === base + 1 ? true : undefined));
      // Running (its middleware chain has returned): its request is not counted yet.
      expect(await value(a, 'http_requests_total', labels)).to.equal(requests);
    } finally {
      client.close();
    }
    await eventually(async () => ((await value(a, 'streams_open')) === base ? true : undefined));
    // Ended: counted once, as a 200 (the status it was written with).
    await eventually(async () => ((await value(a, 'http_requests_total', labels)) === requests + 1 ? true : undefined));
  });

  it('reports materializer lag for every partition and consumer lag for the partitions it reads', async () => {
    const account = fakeAccountId();
    await ingest(a, [{ account_id: account, type: 'message.sent', data: {} }]);
    const partition = String(a.deps.events.producer.partitionOf(account));
    // Once the fan-out has passed the event and it is materialized, every lag is back to 0.
    const samples = await eventually(async () => {
      const { samples: s } = await scrape(a);
      const lags = s.filter((x) => x.name === 'materializer_lag_events');
      if (lags.length !== a.deps.config.kafka.eventsPartitions || lags.some((x) => x.value !== 0)) return undefined;
      return sampleValue(s, 'kafka_consumer_lag', { consumer: 'materializer', partition }) === 0 ? s : undefined;
    }, 20_000);
    expect(sampleValue(samples, 'kafka_consumer_lag', { consumer: 'fanout', partition })).to.equal(0);
  });

  describe('with METRICS_TOKEN', () => {
    let server: http.Server;
    let url: string;
    let close: () => Promise<void>;
    const token = 'metrics-token-for-tests-0123';

    before(async () => {
      // The app alone (no consumers started): /metrics needs nothing else.
      const deps = createDeps(testApiConfig({ METRICS_TOKEN: token }));
      server = http.createServer(createApp(deps).callback());
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      close = async () => {
        await new Promise((resolve) => server.close(resolve));
        await deps.lifecycle.stop();
      };
    });

    after(() => close());

    it('refuses a scrape without the token or with a wrong one', async () => {
      for (const headers of [{}, bearer('metrics-token-for-tests-0124'), { authorization: token }]) {
        const res = await call(url, 'GET', '/metrics', { headers });
        expect(res.status).to.equal(401);
        expect(res.body.error.code).to.equal('unauthorized');
      }
    });

    it('serves the metrics with the token', async () => {
      const { samples } = await scrape(url, bearer(token));
      expect(sampleValue(samples, 'http_requests_total', { method: 'GET', route: '/metrics', status_code: '401' })).to.equal(3);
    });
  });
});
