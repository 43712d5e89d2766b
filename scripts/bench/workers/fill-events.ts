/**
 * Scenario 6's data: `count` events of one account at consecutive offsets of
 * its partition, starting at `first`, written straight into the store as the
 * materializer would store them: each event built by the service's own
 * envelope code (buildEnvelope + toEventDoc), its id and position into
 * `events` (eventIdDoc), and the
 * account's streams (event_pages) built by the materializer's own PageWriter
 * (into memory, then inserted with insertMany, which is much faster on
 * FerretDB than the writer's one replace per page); then the partition's
 * watermark moved past them. Called again with a later `first`, it extends
 * the same streams (their newest pages are rewritten). Going around the log
 * only saves the time of producing and materializing a million events.
 * Run with tsx: node --import tsx scripts/bench/workers/fill-events.ts
 */
import { MongoClient, type Collection } from 'mongodb';
import { buildEnvelope, toEventDoc } from '#shared/eventlog/envelope.js';
import { COLLECTION_NAMES, eventIdDoc, type EventDoc, type StoredEventDoc, type EventPageDirDoc, type EventPageDoc, type EventPageHeadDoc, type WatermarkDoc } from '#shared/mongo/index.js';
import { headId, PageWriter, streamId, type PagesCollection } from '../../../api/src/event-store/pages.js';
import { watermarkId } from '../../../api/src/event-store/watermarks.js';

type PageLike = EventPageDoc | EventPageHeadDoc | EventPageDirDoc;
const [url, db, topic, accountId, partition, first, count] = process.argv.slice(2);
const client = new MongoClient(url as string);
const events = client.db(db).collection<StoredEventDoc>(COLLECTION_NAMES.events);
const pages = client.db(db).collection<PageLike>(COLLECTION_NAMES.eventPages);
const CHUNK = 5000;
const start = Number(first);
const total = Number(count);
const t0 = performance.now();

/** The PageWriter's reads go to the store; its writes are collected here and inserted in bulk. */
const collected = new Map<string, PageLike>();
const collector = {
  findOne: (filter: { _id: string }) => (collected.has(filter._id) ? Promise.resolve(collected.get(filter._id)) : pages.findOne(filter)),
  replaceOne: (filter: { _id: string }, doc: PageLike) => {
    collected.set(filter._id, doc);
    return Promise.resolve();
  },
} as unknown as PagesCollection;
const writer = new PageWriter(collector);
/** Pages each stream had before this call (their ids may be stored already). */
const pagesBefore = new Map<string, number>();
for (const type of [null, 'message.received'] as const) {
  const stream = streamId(accountId as string, Number(partition), type);
  const head = (await pages.findOne({ _id: headId(stream) })) as EventPageHeadDoc | null;
  pagesBefore.set(stream, head?.pages ?? 0);
}

for (let i = 0; i < total; i += CHUNK) {
  const docs: EventDoc[] = [];
  for (let j = i; j < Math.min(total, i + CHUNK); j++) {
    const envelope = buildEnvelope(
      { account_id: accountId as string, type: 'message.received', data: { t: 0, seq: start + j, from: '+14155550123', to: '+14155550199', channel: 'sms', text: 'Running about ten minutes late, see you at the usual place.' } },
      new Date(),
    );
    docs.push(toEventDoc(envelope, { partition: Number(partition), offset: BigInt(start + j) }));
  }
  await events.insertMany(docs.map(eventIdDoc), { ordered: false });
  await writer.write(Number(partition), docs, BigInt(start + i), BigInt(start + i + docs.length - 1));
  // Full pages go now; the newest page of each stream and the heads wait for the end (they change again).
  const full = [...collected.values()].filter((d) => 'first' in d && (d.count ?? d.events?.length ?? 0) >= 100);
  if (full.length > 0) await insertOrReplace(pages, full);
  for (const d of full) collected.delete(d._id);
}
await insertOrReplace(pages, [...collected.values()]);
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

/** New documents by insertMany; those stored by an earlier call (a stream's head, its newest page then) replaced by _id. */
async function insertOrReplace(collection: Collection<PageLike>, docs: PageLike[]): Promise<void> {
  const stored = (id: string): boolean => {
    if (id.endsWith(':h') || /:d\d+$/.test(id)) return true; // heads and directories: replaced (or upserted)
    const cut = id.lastIndexOf(':');
    return Number(id.slice(cut + 1)) < (pagesBefore.get(id.slice(0, cut)) ?? 0);
  };
  const fresh = docs.filter((d) => !stored(d._id));
  for (let i = 0; i < fresh.length; i += 200) await collection.insertMany(fresh.slice(i, i + 200), { ordered: false });
  for (const d of docs) if (stored(d._id)) await collection.replaceOne({ _id: d._id }, d, { upsert: true });
}
