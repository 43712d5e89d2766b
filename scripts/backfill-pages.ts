/**
 * One-off upgrade step: builds the account streams the history is read from
 * (event_pages) out of the events collection of a store written before them.
 * Stop the API processes first (no materializer may write meanwhile).
 *   node --import tsx scripts/backfill-pages.ts <mongo url> <database> <partitions>
 */
import { MongoClient } from 'mongodb';
import { backfillPages } from '../api/src/event-store/backfill.js';
import { COLLECTION_NAMES, type StoredEventDoc, type EventPageDirDoc, type EventPageDoc, type EventPageHeadDoc } from '#shared/mongo/index.js';

const [url, db, partitions] = process.argv.slice(2);
if (!url || !db || !partitions) {
  console.error('usage: node --import tsx scripts/backfill-pages.ts <mongo url> <database> <partitions>');
  process.exit(2);
}
const client = new MongoClient(url);
const database = client.db(db);
const total = await backfillPages(database.collection<StoredEventDoc>(COLLECTION_NAMES.events), database.collection<EventPageDoc | EventPageHeadDoc | EventPageDirDoc>(COLLECTION_NAMES.eventPages), Number(partitions), (p, n) => console.error(`partition ${p}: ${n} events so far`));
console.log(JSON.stringify({ events: total }));
await client.close();
