import { createConsumer, createKafka, ensureTopic, topicCatalog, type Consumer } from '../../shared/src/eventlog/kafka.js';
import { Lifecycle } from '../../shared/src/lifecycle.js';
import { createLogger, type Logger } from '../../shared/src/log.js';
import { createMongo, ensureIndexes, type Mongo } from '../../shared/src/mongo/index.js';
import type { DeliveryConfig } from './config.js';

export interface RunningDelivery {
  log: Logger;
  mongo: Mongo;
  consumer: Consumer;
  close(): Promise<void>;
}

/** Boots the delivery process: joins its consumer group on the events topic. */
export async function startDelivery(config: DeliveryConfig, opts: { log?: Logger } = {}): Promise<RunningDelivery> {
  const log = opts.log ?? createLogger('delivery', config.logLevel).child({ instance: config.instanceId });
  const lifecycle = new Lifecycle(log);
  const mongo = createMongo(config, { log });
  lifecycle.onStop('mongo', () => mongo.close());
  await ensureIndexes(mongo, log);

  const kafka = createKafka(config, log);
  const admin = kafka.admin();
  await admin.connect();
  await ensureTopic(admin, topicCatalog(config).events, log);
  await admin.disconnect();

  const consumer = createConsumer(kafka, config.groupId);
  await consumer.connect();
  lifecycle.onStop('consumer', () => consumer.disconnect());
  await consumer.subscribe({ topic: config.kafka.eventsTopic, fromBeginning: true });
  await consumer.run({
    eachBatchAutoResolve: false,
    eachBatch: async () => {
      // Webhook dispatch lands with the webhooks issue; until then nothing is resolved or committed.
    },
  });
  log.info({ group: config.groupId }, 'delivery worker started');
  return { log, mongo, consumer, close: () => lifecycle.stop() };
}
