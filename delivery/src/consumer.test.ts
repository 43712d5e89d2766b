import { expect } from 'chai';
import type { EventEnvelope } from '#shared/eventlog/types.js';
import type { WebhookDoc } from '#shared/mongo/index.js';
import { pino } from 'pino';
import { encodeEnvelope } from '#shared/eventlog/envelope.js';
import type { EachBatchPayload, KafkaMessage } from '#shared/eventlog/kafka.js';
import { eachBatchHandler } from './consumer.js';
import { matches } from './event-match.js';
import type { DeliveryCollections } from './deliveries.js';
import type { Dispatcher } from './dispatch.js';
import type { Job } from './jobs.js';
import { PartitionProgress } from './partition-progress.js';

const sub = (extra: Partial<WebhookDoc> = {}): WebhookDoc =>
  ({ _id: 'wh_1', account_id: 'acct_1', events: ['*'], created_at: new Date('2026-01-01T00:00:00Z'), ...extra }) as WebhookDoc;
const event = (at: string): EventEnvelope => ({ id: 'evt_1', account_id: 'acct_1', type: 'call.started', created_at: at, data: {} }) as EventEnvelope;

describe('matching events to subscriptions', () => {
  it('treats a subscription stored without `enabled` as enabled', () => {
    expect(matches(sub(), event('2026-01-02T00:00:00Z'))).to.equal(true);
    expect(matches(sub({ enabled: true }), event('2026-01-02T00:00:00Z'))).to.equal(true);
  });

  it('matches nothing for a disabled subscription', () => {
    expect(matches(sub({ enabled: false }), event('2026-01-02T00:00:00Z'))).to.equal(false);
  });

  it('after a re-enable, matches only events at or after enabled_at (as after created_at)', () => {
    const reenabled = sub({ enabled: true, enabled_at: new Date('2026-01-05T00:00:00Z') });
    expect(matches(reenabled, event('2026-01-04T23:59:59.999Z'))).to.equal(false);
    expect(matches(reenabled, event('2026-01-05T00:00:00Z'))).to.equal(true);
    expect(matches(sub(), event('2025-12-31T23:59:59Z'))).to.equal(false);
  });
});

describe('the delivery consumer\'s offsets', () => {
  const silent = pino({ level: 'silent' });
  const envelopeAt = (id: string): EventEnvelope =>
    ({ id, account_id: 'acct_1', type: 'call.started', created_at: new Date().toISOString(), data: {} }) as EventEnvelope;
  const message = (offset: string, value: Buffer): KafkaMessage => ({ key: null, value, offset, timestamp: '0', attributes: 0, headers: {} }) as unknown as KafkaMessage;

  it('never lets the commit pass an event whose deliveries are not tracked yet, whatever follows it in the batch', async () => {
    // The store answers the batch's subscription query only when the test says so.
    let answer!: (subs: WebhookDoc[]) => void;
    const subsQuery = new Promise<WebhookDoc[]>((resolve) => (answer = resolve));
    const collections = { webhooks: { find: () => ({ toArray: () => subsQuery }) } } as unknown as DeliveryCollections;
    const finishers: (() => void)[] = [];
    const dispatcher = {
      concurrency: 16,
      backlog: 0,
      recording: 0,
      roomFor: () => 1,
      isSlowed: () => false,
      isThrottled: () => false,
      isStalled: () => false,
      enqueue: (job: Job) => (finishers.push(() => (job.source === 'log' ? job.done() : undefined)), 'queued'),
      storeOverflow: () => undefined,
    } as unknown as Dispatcher;
    const progress = new PartitionProgress();
    const handler = eachBatchHandler({
      log: silent,
      collections,
      dispatcher,
      owner: 'proc-a',
      leaseMs: 8000,
      clock: () => new Date(),
      offsets: { of: () => progress, unfinished: 0, commit: async () => undefined },
    });
    // An event, then a record that is no event envelope (another writer; a type added in a rolling deploy).
    const messages = [
      message('10', encodeEnvelope(envelopeAt('evt_a'))),
      message('11', Buffer.from('not an envelope')),
      message('12', Buffer.from(JSON.stringify({ ...envelopeAt('evt_b'), type: 'call.type_from_a_newer_version' }))),
    ];
    const payload = {
      batch: { topic: 't', partition: 0, messages, lastOffset: () => '12' },
      isRunning: () => true,
      isStale: () => false,
      heartbeat: async () => undefined,
      resolveOffset: () => undefined,
    } as unknown as EachBatchPayload;
    const running = handler(payload);
    // While the batch waits for its subscriptions, what the committer would commit:
    await new Promise((r) => setTimeout(r, 20));
    const watermark = progress.watermark();
    expect(watermark === null || BigInt(watermark) <= 10n, `commit at ${watermark} while evt_a (offset 10) has no delivery yet`).to.equal(true);
    answer([{ _id: 'wh_1', account_id: 'acct_1', events: ['*'], created_at: new Date(0) } as WebhookDoc]);
    await running;
    expect(finishers).to.have.length(1);
    expect(progress.watermark(), 'held at the event with an unfinished delivery').to.equal('10');
    finishers[0]!();
    expect(progress.watermark(), 'past the whole batch once it is finished').to.equal('13');
  });
});
