import { expect } from 'chai';
import { EventEmitter } from 'node:events';
import { parseMetrics, sampleValue } from '../test/support/prometheus.js';
import type { Consumer, EachBatchPayload } from './eventlog/kafka.js';
import { ConsumerLag, Registry, metricsAuthorizer, statusClass } from './metrics.js';

const GROUP_JOIN = 'consumer.group_join';

/** Enough of a kafkajs consumer for ConsumerLag: its group-join event. */
function fakeConsumer(): Consumer & EventEmitter {
  const emitter = new EventEmitter() as EventEmitter & { events: { GROUP_JOIN: string } };
  emitter.events = { GROUP_JOIN };
  return emitter as unknown as Consumer & EventEmitter;
}

function payload(partition: number, offsets: number[], highWatermark: number, resolved: string[] = []): EachBatchPayload {
  return {
    batch: {
      partition,
      highWatermark: String(highWatermark),
      messages: offsets.map((o) => ({ offset: String(o) })),
      firstOffset: () => (offsets.length > 0 ? String(offsets[0]) : null),
    },
    resolveOffset: (offset: string) => resolved.push(offset),
  } as unknown as EachBatchPayload;
}

async function lagOf(registry: Registry, consumer: string, partition: number): Promise<number | undefined> {
  return sampleValue(parseMetrics(await registry.metrics()), 'kafka_consumer_lag', { consumer, partition: String(partition) });
}

describe('ConsumerLag', () => {
  it('reports the high watermark minus the offset after the last one the handler resolved', async () => {
    const registry = new Registry();
    const lag = new ConsumerLag(registry);
    const resolved: string[] = [];
    const handler = lag.track('materializer', fakeConsumer(), 'events', async (p) => {
      p.resolveOffset('11'); // handled 10 and 11 of 10..14, then stopped (a rebalance, say)
    });
    await handler(payload(2, [10, 11, 12, 13, 14], 20, resolved));
    expect(resolved).to.deep.equal(['11']); // still reaches kafkajs
    expect(await lagOf(registry, 'materializer', 2)).to.equal(8); // offsets 12..19 remain
    expect(lag.highWatermark(2)).to.equal(20n);
  });

  it('counts the whole batch as lag when the handler fails before resolving anything', async () => {
    const registry = new Registry();
    const lag = new ConsumerLag(registry);
    const handler = lag.track('delivery', fakeConsumer(), 'events', async () => {
      throw new Error('mongo down');
    });
    await handler(payload(0, [5, 6, 7], 8)).catch(() => undefined);
    expect(await lagOf(registry, 'delivery', 0)).to.equal(3);
  });

  it('drops partitions that a rebalance moved to another member', async () => {
    const registry = new Registry();
    const lag = new ConsumerLag(registry);
    const consumer = fakeConsumer();
    const handler = lag.track('materializer', consumer, 'events', async (p) => p.resolveOffset(p.batch.messages.at(-1)!.offset));
    await handler(payload(0, [1], 2));
    await handler(payload(1, [1], 2));
    consumer.emit(GROUP_JOIN, { payload: { memberAssignment: { events: [1] } } });
    expect(await lagOf(registry, 'materializer', 0)).to.equal(undefined);
    expect(await lagOf(registry, 'materializer', 1)).to.equal(0);
  });
});

describe('metricsAuthorizer', () => {
  it('lets everyone in without a token, and only the right bearer with one', () => {
    expect(metricsAuthorizer(null)(undefined)).to.equal(true);
    const check = metricsAuthorizer('a-metrics-token-123456');
    expect(check('Bearer a-metrics-token-123456')).to.equal(true);
    expect(check('bearer  a-metrics-token-123456')).to.equal(true);
    expect(check('Bearer a-metrics-token-123457')).to.equal(false);
    expect(check('a-metrics-token-123456')).to.equal(false);
    expect(check(undefined)).to.equal(false);
  });

  it('turns a status into its class', () => {
    expect([200, 204, 404, 503].map(statusClass)).to.deep.equal(['2xx', '2xx', '4xx', '5xx']);
  });
});
