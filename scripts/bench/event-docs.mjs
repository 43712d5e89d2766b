// Micro-benchmark: what one document of the events collection costs FerretDB,
// as the materializer writes it now (EventIdDoc: id, account, position) and as
// it wrote it before (EventDoc: the whole event, its body also in the stream).
//
// For each shape, `--events` documents (default 6,000) go into a database of
// their own, into `events` with its `position` index, by ordered insertMany of
// `--batch` (500, the materializer's insert slice), the shapes interleaved
// batch by batch so the machine's load hits both alike. Events of ~300 B of
// data over 1,000 accounts, built by the service's own code (buildEnvelope,
// toEventDoc, eventIdDoc). Reported per event:
//   - FerretDB CPU per insertMany, from /proc/<pid>/stat (utime + stime, every
//     thread) around each command;
//   - bytes: collStats (size, storageSize, totalIndexSize) and the growth of
//     the database's SQLite file after `compact` and a clean stop (which
//     checkpoints the WAL into it), less an empty database's (private only).
//
// Runs on a private FerretDB + Kafka (INFRA_INSTANCE=event-docs, wiped before
// and after; --keep keeps it running), or on MONGO_URL + --pid <ferretdb pid>
// [--data <its data dir>].
//
//   node --import tsx scripts/bench/event-docs.mjs [--events 6000] [--batch 500]
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { MongoClient } from 'mongodb';
import { buildEnvelope, toEventDoc } from '../../shared/src/eventlog/envelope.ts';
import { eventIdDoc } from '../../shared/src/mongo/documents.ts';
import { parseArgs } from './lib/args.mjs';
import { processTicks as ticks, ticksPerSecond as clockTicks } from './lib/cpu-share.mjs';
import { privateStore } from './lib/private-store.mjs';

const INSTANCE = 'event-docs';
const args = parseArgs(process.argv.slice(2));
const ticksPerSecond = clockTicks();
const EVENTS = Number(args.events ?? 6000);
const BATCH = Number(args.batch ?? 500);


const TEXT = 'Running about ten minutes late, see you at the usual place. Traffic on the bridge again, sorry. ';
let offset = 0;
/** One batch of events as the materializer decodes them (EventDoc), ~300 B of data each. */
function batch() {
  return Array.from({ length: BATCH }, () => {
    const envelope = buildEnvelope(
      { account_id: `acct_${String(Math.floor(Math.random() * 1000)).padStart(24, '0')}`, type: Math.random() < 0.8 ? 'message.sent' : 'message.delivered', data: { from: '+14155550123', to: '+14155550199', channel: 'sms', text: TEXT + TEXT.slice(0, 80) } },
      new Date(),
    );
    return toEventDoc(envelope, { partition: 0, offset: BigInt(offset++) });
  });
}

/** The database's SQLite file (FerretDB stopped: its WAL is checkpointed into it on a clean close). */
function fileBytes(dataDir, db) {
  const file = dataDir ? join(dataDir, `${db}.sqlite`) : null;
  return file && existsSync(file) ? statSync(file).size : null;
}

const fmt = (n, d = 0) => (n === null || Number.isNaN(n) ? '-' : n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d }));

async function main() {
  const svc = privateStore(INSTANCE, args);
  const client = new MongoClient(svc.url, { socketTimeoutMS: 120_000, serverSelectionTimeoutMS: 30_000 });
  try {
    await client.connect();
    const shapes = {
      whole: { db: client.db('event_docs_whole'), map: (d) => d },
      ids: { db: client.db('event_docs_ids'), map: eventIdDoc },
    };
    const res = {};
    // The empty database's file, for the baseline of the file sizes.
    for (const db of [...Object.values(shapes).map((s) => s.db), client.db('event_docs_empty')]) {
      await db.dropDatabase().catch(() => undefined);
      await db.collection('events').createIndex({ partition: 1, offset: 1 }, { name: 'position' });
      await db.collection('events').insertOne({ _id: 'warm', account_id: 'a', partition: 1, offset: 0 });
    }
    for (const name of Object.keys(shapes)) res[name] = { ticks: 0, n: 0, bson: 0 };
    for (let r = 0; offset < EVENTS; r++) {
      const docs = batch();
      for (const name of r % 2 ? ['ids', 'whole'] : ['whole', 'ids']) {
        const mapped = docs.map(shapes[name].map);
        const t0 = ticks(svc.pid);
        await shapes[name].db.collection('events').insertMany(mapped, { ordered: true });
        res[name].ticks += ticks(svc.pid) - t0;
        res[name].n += mapped.length;
        for (const d of mapped) res[name].bson += Buffer.byteLength(JSON.stringify(d));
      }
    }
    const stats = {};
    for (const [name, s] of Object.entries(shapes)) {
      stats[name] = await s.db.command({ collStats: 'events' });
      // FerretDB's compact on SQLite vacuums the database file (MongoDB's frees WiredTiger blocks).
      await s.db.command({ compact: 'events', force: true }).catch((err) => console.error(`compact: ${err.message}`));
    }
    await client.close();
    // A clean stop checkpoints the WAL into each database's file: what stays on disk.
    svc.stop?.();
    const empty = fileBytes(svc.dataDir, 'event_docs_empty');
    console.log(`events collection, ${EVENTS} events per shape, insertMany of ${BATCH} (FerretDB ${svc.pid})`);
    console.log('| Document | JSON bytes | collStats size / event | index / event | SQLite file / event (compacted, WAL checkpointed) | FerretDB CPU / insertMany of 500 | CPU / event |');
    console.log('|---|---|---|---|---|---|---|');
    for (const [name, s] of Object.entries(shapes)) {
      const x = res[name];
      const st = stats[name];
      const file = fileBytes(svc.dataDir, s.db.databaseName);
      const cpuUs = ((x.ticks / ticksPerSecond) * 1e6) / x.n;
      console.log(
        `| ${name === 'whole' ? 'whole event (EventDoc, before)' : 'id and position (EventIdDoc)'} | ${fmt(x.bson / x.n)} | ${fmt(st.size / st.count)} | ${fmt(st.totalIndexSize / st.count)} | ${file === null || empty === null ? '-' : fmt((file - empty) / x.n)} | ${fmt((cpuUs * BATCH) / 1000, 1)} ms | ${fmt(cpuUs)} µs |`,
      );
    }
  } finally {
    await client.close();
    svc.down();
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
