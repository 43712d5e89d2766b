/**
 * Operational notifications against real Kafka, the real Mongo server and an
 * HTTPS receiver: a delivery given up for good (a 410) and a subscription
 * disabled for failing (WEBHOOK_DISABLE_AFTER 2 s) become `webhook.delivery_exhausted`
 * and `webhook.disabled` events on the account's own log, with their
 * derived ids; a subscription listing them by name receives them, `["*"]`
 * does not, the subscription a notification is about does not (even when it
 * lists the type), and an account that listed neither type gets none.
 */
import { expect } from 'chai';
import { Kafka, logLevel } from 'kafkajs';
import type { EventEnvelope } from '#shared/eventlog/types.js';
import { deliveryId } from '#shared/mongo/delivery-queue.js';
import type { WebhookDoc } from '#shared/mongo/index.js';
import { ownDatabase, uniqueName } from '#test-support/env.js';
import { Receiver, status } from '#test-support/receiver.js';
import { notificationId } from '../src/notifications.js';
import { atFileEnd } from '#test-support/cleanup.js';
import { loadDeliveryConfig } from '../src/config.js';
import { startDelivery } from '../src/worker.js';
import { deliveryTestEnv, envelope, newAccountId, TestDb, TestLog, waitForGroup } from './support/delivery.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** How many messages the topic holds (this file's own topic). */
async function topicSize(env: Record<string, string>): Promise<number> {
  const admin = new Kafka({ brokers: env.KAFKA_BROKERS!.split(','), logLevel: logLevel.NOTHING }).admin();
  await admin.connect();
  try {
    return (await admin.fetchTopicOffsets(env.EVENTS_TOPIC!)).reduce((n, p) => n + Number(p.high) - Number(p.low), 0);
  } finally {
    await admin.disconnect();
  }
}

describe('operational notifications: webhook.disabled and webhook.delivery_exhausted', function () {
  this.timeout(60_000);

  it('writes them to the opted-in account log and delivers them only to subscriptions that list them, never to the one they are about', async () => {
    const receiver = await Receiver.start();
    try {
      const env = deliveryTestEnv(receiver.caFile, {
        EVENTS_TOPIC: uniqueName('events-notify'),
        MONGO_DB: ownDatabase('notify'),
        WEBHOOK_DISABLE_AFTER: '2s',
        WEBHOOK_RETRY_SCHEDULE: Array.from({ length: 40 }, () => '200ms').join(','),
        WEBHOOK_POLL_INTERVAL_MS: '100',
      });
      // What happened, in order, to the give-up of /gone: its notification produced, its record handed over.
      const order: string[] = [];
      let goneId = '';
      const worker = await startDelivery(loadDeliveryConfig(env), {
        hooks: {
          beforeRecord: async (attempt) => {
            if (attempt.delivery.subscription_id === goneId) order.push(`record ${attempt.delivery._id}`);
          },
        },
      });
      atFileEnd(() => worker.close());
      const publish = worker.deps.eventLog.publish.bind(worker.deps.eventLog);
      worker.deps.eventLog.publish = async (envelopes) => {
        const out = await publish(envelopes);
        for (const e of envelopes) if (e.type === 'webhook.delivery_exhausted') order.push(`notified ${(e.data as { delivery_id: string }).delivery_id}`);
        return out;
      };
      await waitForGroup(env);
      const log = new TestLog(env);
      const db = new TestDb(env);

      const account = newAccountId();
      const other = newAccountId();
      receiver.on('/watch', status(200)).on('/star', status(200)).on('/gone', status(410)).on('/dead', status(500)).on('/other', status(410)).on('/gone2', status(410));
      await db.subscribe(account, receiver.url('/watch'), ['webhook.disabled', 'webhook.delivery_exhausted']);
      await db.subscribe(account, receiver.url('/star'), ['*']);
      // Lists the notification of its own give-up: it must not receive it (a 410 there would loop).
      const gone = await db.subscribe(account, receiver.url('/gone'), ['call.started', 'webhook.delivery_exhausted']);
      goneId = gone._id;
      const dead = await db.subscribe(account, receiver.url('/dead'), ['call.ended', 'webhook.disabled']);
      // Lists the give-ups and fails for good too: told of /gone's, its own give-up of that notification is not
      // notified (with /gone listing the type as well, each would otherwise be told of the other's, for ever).
      await db.subscribe(account, receiver.url('/gone2'), ['webhook.delivery_exhausted']);
      // Not opted in: its give-up is not notified.
      await db.subscribe(other, receiver.url('/other'), ['*']);

      const started = envelope(account, 'call.started');
      const ended = envelope(account, 'call.ended');
      await log.publish([started, ended, envelope(other, 'call.started')]);
      await receiver.waitFor('/other', 1);

      // The subscription listing them receives both (read from the log by the delivery consumer).
      const got = await receiver.waitFor('/watch', 2);
      expect(got.map((r) => r.headers['x-service-event']).sort()).to.deep.equal(['webhook.delivery_exhausted', 'webhook.disabled']);
      const exhausted = got.find((r) => r.headers['x-service-event'] === 'webhook.delivery_exhausted')!.body as EventEnvelope;
      const disabled = got.find((r) => r.headers['x-service-event'] === 'webhook.disabled')!.body as EventEnvelope;

      const givenUp = deliveryId(started.id, gone._id);
      // The notification is on the log (acknowledged) before the give-up's record is written: a crash between
      // them sends, gives up and notifies again under the same id; none loses it.
      expect(order).to.deep.equal([`notified ${givenUp}`, `record ${givenUp}`]);
      expect(exhausted.id).to.equal(notificationId('webhook.delivery_exhausted', givenUp));
      expect(exhausted.data).to.include({ subscription_id: gone._id, url: new URL(gone.url).origin, delivery_id: givenUp, event_id: started.id, event_type: 'call.started', reason: 'permanent_failure', attempts: 1, last_status: 410 });
      expect(disabled.data).to.include({ subscription_id: dead._id, url: new URL(dead.url).origin, reason: 'endpoint_failing' });
      const deadDoc = (await db.collection('webhooks').findOne({ _id: dead._id })) as WebhookDoc;
      expect(deadDoc.enabled).to.equal(false);
      expect(disabled.id).to.equal(notificationId('webhook.disabled', `${dead._id}\n${(deadDoc.enabled_at ?? deadDoc.created_at).getTime()}`));
      expect(JSON.stringify(got.map((r) => r.body)), 'no secret in a notification').to.not.include('whsec_');

      await sleep(1000); // anything else on its way would have landed
      const types = (path: string) => receiver.received(path).map((r) => r.headers['x-service-event']);
      expect(types('/watch')).to.have.length(2);
      expect(types('/star').sort(), '"*" does not match them').to.deep.equal(['call.ended', 'call.started']);
      expect(types('/gone'), 'not its own give-up').to.deep.equal(['call.started']);
      expect(types('/dead').every((t) => t === 'call.ended'), 'not its own disabling').to.equal(true);
      expect(types('/other')).to.deep.equal(['call.started']);
      expect(types('/gone2'), "told of /gone's give-up once; its own give-up of that is not notified").to.deep.equal(['webhook.delivery_exhausted']);
      // On the log: the three events published and the two notifications, once each; nothing for
      // the account that did not opt in (its 410 was given up too).
      expect(await topicSize(env)).to.equal(5);
    } finally {
      await receiver.close();
    }
  });
});
