/**
 * Scenario 6's data: `count` events of one account at consecutive offsets of
 * its partition, starting at `first`, written straight into the store as the
 * materializer would store them: each event built by the service's own
 * envelope code (buildEnvelope + toEventDoc), its id and position into
 * `events` (eventIdDoc), and the
 * account's streams (event_pages) built by the materializer's own PageWriter
 * (its writes collected in memory, then sent in bulk: much faster on FerretDB
 * than the writer's commands one by one); then the partition's watermark
 * moved past them. Called again with a later `first`, it extends the same
 * streams (a new claim, new fragments and pages after the stored ones). Going around the log
 * only saves the time of producing and materializing a million events.
 * Run with tsx: node --import tsx scripts/bench/workers/fill-events.ts
 */
import { MongoClient } from 'mongodb';
import { buildEnvelope, toEventDoc } from '#shared/eventlog/envelope.js';
import { COLLECTION_NAMES, eventIdDoc, type EventDoc, type StoredEventDoc, type EventPageDirDoc, type EventPageDoc, type EventPageHeadDoc, type WatermarkDoc } from '#shared/mongo/index.js';
import { PageWriter, type PagesCollection } from '../../../api/src/event-store/pages.js';
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

/**
 * The PageWriter's reads go to the store unless it wrote the document here; its writes (claims, the
 * journal, fragments, the compactions' pages, directories and heads, the deletes of merged fragments)
 * are collected and sent at the end in bulk.
 */
const collected = new Map<string, PageLike>();
const deleted = new Set<string>();
const current = async (id: string): Promise<PageLike | null> => (deleted.has(id) ? null : (collected.get(id) ?? (await pages.findOne({ _id: id }))));
const put = (doc: PageLike): void => {
  collected.set(doc._id, doc);
  deleted.delete(doc._id);
};
const duplicate = (index = 0): Error => Object.assign(new Error('E11000 duplicate key'), { code: 11000, writeErrors: [{ index, code: 11000 }] });
type Op = { updateOne: { filter: { _id: string } } } | { replaceOne: { filter: { _id: string }; replacement: PageLike } } | { deleteOne: { filter: { _id: string } } };
const collector = {
  findOne: async (filter: { _id: string }) => current(filter._id),
  insertOne: async (doc: PageLike) => {
    if (await current(doc._id)) throw duplicate();
    put(doc);
  },
  insertMany: async (docs: PageLike[]) => {
    for (const [i, doc] of docs.entries()) {
      if (await current(doc._id)) throw duplicate(i);
      put(doc);
    }
  },
  // The claims' hint ($max, upserted).
  updateOne: async (filter: { _id: string }, update: { $max: Record<string, number> }) => {
    const doc = { ...((await current(filter._id)) ?? { _id: filter._id }) } as Record<string, unknown>;
    for (const [k, v] of Object.entries(update.$max)) if (!(typeof doc[k] === 'number' && (doc[k] as number) >= v)) doc[k] = v;
    put(doc as unknown as PageLike);
  },
  // A fenced command: the guard (nobody else writes here, so it never refuses), then replaces; or deletes.
  bulkWrite: async (ops: Op[]) => {
    for (const op of ops) {
      if ('replaceOne' in op) put(op.replaceOne.replacement);
      else if ('deleteOne' in op) {
        collected.delete(op.deleteOne.filter._id);
        deleted.add(op.deleteOne.filter._id);
      }
    }
  },
} as unknown as PagesCollection;
const writer = new PageWriter(collector);

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
  // A chunk of one account is a page's worth and more: compacted at once, as the materializer does after the watermark.
  await writer.compact(Number(partition), BigInt(start + i));
}
const written = [...collected.values()];
for (let i = 0; i < written.length; i += 200) {
  await pages.bulkWrite(
    written.slice(i, i + 200).map((d) => ({ replaceOne: { filter: { _id: d._id }, replacement: d, upsert: true } })),
    { ordered: false },
  );
}
// Fragments an earlier call stored and this one's compaction merged.
const gone = [...deleted];
for (let i = 0; i < gone.length; i += 500) await pages.bulkWrite(gone.slice(i, i + 500).map((id) => ({ deleteOne: { filter: { _id: id } } })), { ordered: true });
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
