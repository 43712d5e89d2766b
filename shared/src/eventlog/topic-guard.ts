/**
 * The event topic as this deployment first knew it, kept in MongoDB
 * (`event_topics`, one document per topic name), checked by every process
 * (api and delivery) at start:
 * - The partition count is recorded on first start. A topic found with another
 *   count (someone added partitions) would move accounts to other partitions
 *   and break every cursor: the process refuses to start, naming the
 *   procedure (README, "Changing the partition count").
 * - The Kafka topic id is recorded with it and stamped on every watermark. A
 *   topic deleted and recreated under the same name has a new id: its offsets
 *   start again, so the watermarks of the old log are removed (loudly) and
 *   never trusted for the new one.
 */
import { MongoServerError, type Collection } from 'mongodb';
import type { EventTopicDoc, WatermarkDoc } from '../mongo/documents.js';
import type { Logger } from '../log.js';
import { partitionCount, type Admin, type TopicSpec } from './kafka.js';
import { fetchTopicId } from './topic-id.js';

export class TopicMismatchError extends Error {
  override readonly name = 'TopicMismatchError';
}

interface TopicFacts {
  topic: string;
  /** Partition count of the topic as it is on the broker now. */
  partitions: number;
  /** Kafka topic id of the topic as it is on the broker now. */
  topicId: string;
}

interface TopicGuardStores {
  eventTopics: Collection<EventTopicDoc>;
  watermarks: Collection<WatermarkDoc>;
}

/** The topic as it is on the broker now. */
export async function topicFacts(admin: Admin, spec: TopicSpec): Promise<TopicFacts> {
  return { topic: spec.name, partitions: await partitionCount(admin, spec.name), topicId: await fetchTopicId(spec.brokers, spec.name) };
}

/**
 * Records the topic on first start; afterwards refuses another partition
 * count (TopicMismatchError) and resets the watermarks of a recreated topic.
 * Safe to run from several processes at once.
 */
export async function guardTopic(stores: TopicGuardStores, facts: TopicFacts, log: Logger): Promise<void> {
  const now = new Date();
  let recorded = await stores.eventTopics.findOne({ _id: facts.topic });
  if (!recorded) {
    try {
      await stores.eventTopics.insertOne({ _id: facts.topic, partitions: facts.partitions, topic_id: facts.topicId, recorded_at: now, updated_at: now });
      log.info({ topic: facts.topic, partitions: facts.partitions, topicId: facts.topicId }, 'recorded the event topic (partition count and Kafka topic id)');
      recorded = { _id: facts.topic, partitions: facts.partitions, topic_id: null, recorded_at: now, updated_at: now };
    } catch (err) {
      if (!(err instanceof MongoServerError && err.code === 11000)) throw err;
      recorded = await stores.eventTopics.findOne({ _id: facts.topic });
      if (!recorded) throw new Error(`event topic record of ${facts.topic} vanished while being created`, { cause: err });
    }
  }
  if (recorded.partitions !== facts.partitions) {
    throw new TopicMismatchError(
      `Kafka topic "${facts.topic}" has ${facts.partitions} partitions, but this deployment recorded ${recorded.partitions} when it first started ` +
        `(MongoDB ${stores.eventTopics.collectionName}). Accounts are placed by partition count and cursors name partitions, so changing the count ` +
        'is a migration, not a setting: see README, "Changing the partition count". Refusing to start.',
    );
  }
  if (recorded.topic_id === null || recorded.topic_id === facts.topicId) {
    // Watermarks written before topic ids were recorded (an upgrade; or a process that recorded the
    // topic and died before this step) belong to this topic: adopted, so the materializer can raise them.
    await stores.watermarks.updateMany({ topic: facts.topic, topic_id: { $exists: false } }, { $set: { topic_id: facts.topicId } });
    if (recorded.topic_id === null) await stores.eventTopics.updateOne({ _id: facts.topic, topic_id: null }, { $set: { topic_id: facts.topicId, updated_at: now } });
    return;
  }
  log.error(
    { topic: facts.topic, recordedTopicId: recorded.topic_id, topicId: facts.topicId },
    'THE EVENT TOPIC WAS RECREATED: its Kafka topic id changed, so its offsets start again. Resetting the materializer watermarks of the old log; ' +
      'events already in MongoDB keep their old cursors, and cursors clients hold from the old log no longer mean what they meant',
  );
  // Only watermarks of another log: a process that already reset them may be writing the new log's.
  const removed = await stores.watermarks.deleteMany({ topic: facts.topic, topic_id: { $ne: facts.topicId } });
  await stores.eventTopics.updateOne({ _id: facts.topic, topic_id: recorded.topic_id }, { $set: { topic_id: facts.topicId, updated_at: now } });
  log.error({ topic: facts.topic, watermarksRemoved: removed.deletedCount }, 'watermarks of the old event topic removed');
}
