/**
 * Scenario 6's data: `count` events of one account written straight into the
 * events collection, each document built by the service's own envelope code
 * (buildEnvelope + toEventDoc) at consecutive offsets of the account's
 * partition, exactly as the materializer would store them, and the
 * partition's watermark moved past them. Going around the
 * log only saves the time of producing and materializing 100,000 events.
 * Run with tsx: node --import tsx scripts/bench/workers/fill-events.ts
 */
import { MongoClient } from 'mongodb';
import { buildEnvelope, toEventDoc } from '../../../shared/src/eventlog/envelope.js';
import { COLLECTION_NAMES, type WatermarkDoc } from '../../../shared/src/mongo/index.js';
import { watermarkId } from '../../../api/src/event-store/watermarks.js';

const [url, db, topic, accountId, partition, first, count] = process.argv.slice(2);
const client = new MongoClient(url as string);
const events = client.db(db).collection(COLLECTION_NAMES.events);
const CHUNK = 5000;
const start = Number(first);
const total = Number(count);
const t0 = performance.now();
for (let i = 0; i < total; i += CHUNK) {
  const docs = [];
  for (let j = i; j < Math.min(total, i + CHUNK); j++) {
    const envelope = buildEnvelope(
      { account_id: accountId as string, type: 'message.received', data: { t: 0, seq: j, from: '+14155550123', to: '+14155550199', channel: 'sms', text: 'Running about ten minutes late, see you at the usual place.' } },
      new Date(),
    );
    docs.push(toEventDoc(envelope, { partition: Number(partition), offset: BigInt(start + j) }));
  }
  await events.insertMany(docs as never[], { ordered: false });
}
// Polling reads only what the watermark covers: move it past the stored events, as the materializer would.
await client
  .db(db)
  .collection<WatermarkDoc>(COLLECTION_NAMES.watermarks)
  .updateOne(
    { _id: watermarkId(topic as string, Number(partition)) },
    { $max: { offset: start + total - 1 }, $set: { updated_at: new Date() }, $setOnInsert: { topic: topic as string, partition: Number(partition) } },
    { upsert: true },
  );
await client.close();
console.log(JSON.stringify({ inserted: total, seconds: (performance.now() - t0) / 1000 }));
