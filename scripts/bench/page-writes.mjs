// Micro-benchmark: FerretDB CPU of the materializer's fenced page writes by
// command shape, and of the events collection's two secondary indexes.
//
// A chunk of the sustained scenario (500 events over 1,000 accounts) rewrites
// about `--pages` documents of the pages collection (newest pages, directories,
// heads; sizes up to ~40 KB). Each write is fenced: a `$inc` guard on the next
// epoch's claim, then the replace (api/src/event-store/pages.ts). Shapes:
//   per-page   one ordered bulkWrite [guard, replace] per write (one command each)
//   chunk      one ordered bulkWrite [guard, r1, guard, r2, ...] for the chunk
//   group:K    ordered bulkWrites of K writes, a guard before each ([g, r] x K)
//   shared:K   ordered bulkWrites [guard, r1..rK] (one guard per K replaces)
// FerretDB's CPU is read from /proc/<pid>/stat (utime + stime, every thread)
// around the rounds: robust to the machine's load, unlike wall time. Shapes
// run interleaved, round after round, so drift hits them alike.
// It also checks the fence in every shape (a newer claim: the bulk is refused
// at its first guard, writeErrors[0].index names it, nothing after it lands)
// and probes, on a database of its own, how many replaces of existing
// documents one update command may hold before FerretDB 1.24 (SQLite) hangs:
// each matched statement keeps a connection of the database's pool (100) until
// the command ends, so a command matching about 100 documents waits for ever,
// and so does every later command of that database (--hang 64,96,128).
// Indexes: insertMany of 500 events (~350 B) into a collection with and
// without the events' two secondary indexes, FerretDB CPU per event.
//
// --wal S: instead, for each shape, 4 writers (the partitions one process
// writes at once) send chunks for S seconds into one database, and the
// largest size of its SQLite WAL file is reported beside the CPU per write: a
// command keeps its statements' reads open until it ends, and the WAL is reset
// only when no reader is behind its end.
//
// Runs on a private FerretDB + Kafka (INFRA_INSTANCE=page-writes, wiped
// before and after; --keep keeps it running), or on MONGO_URL + --pid <ferretdb pid>.
//
//   node scripts/bench/page-writes.mjs [--rounds 6] [--chunks 4] [--pages 166] [--events 500]
//                                      [--shapes per-page,group:4,group:8,group:16,shared:8] [--hang 64,96,128]
import { randomBytes } from 'node:crypto';
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { Binary, MongoClient } from 'mongodb';
import { parseArgs } from './lib/args.mjs';
import { machineTicks, processTicks as ticks, ticksPerSecond as clockTicks } from './lib/cpu-share.mjs';
import { privateStore } from './lib/private-store.mjs';

const INSTANCE = 'page-writes';
const args = parseArgs(process.argv.slice(2));
const ticksPerSecond = clockTicks();
const ROUNDS = Number(args.rounds ?? 6);
const CHUNKS = Number(args.chunks ?? 4);
const PAGES = Number(args.pages ?? 166);
const EVENTS = Number(args.events ?? 500);
const STREAMS = 2000;
const HANG = String(args.hang ?? '64,96,128').split(',').map(Number);
const SHAPES = (args.shapes ?? 'per-page,group:4,group:8,group:16,shared:8').split(',');


/** A page write as the materializer sends it: a newest page (packed events), a directory or a head. */
function pageDoc(i, bytes) {
  return { _id: `acct-${i >> 1}:0${i & 1 ? ':message.sent' : ''}:3`, first: 1000, last: 1099, bytes, count: Math.max(1, Math.round(bytes / 350)), packed: new Binary(randomBytes(bytes)) };
}

/** The writes of one chunk: `PAGES` distinct streams, pages of 350 B..40 KB (a page grows one event at a time), a tenth of them heads and directories (small). */
function chunkWrites() {
  const picked = new Set();
  while (picked.size < PAGES) picked.add(Math.floor(Math.random() * STREAMS));
  return [...picked].map((i) => (Math.random() < 0.1 ? { _id: `acct-${i >> 1}:0:h`, pages: 4, per_dir: 256, dirs: [0], topic_id: 'topic-id' } : pageDoc(i, 350 * (1 + Math.floor(Math.random() * 115)))));
}

const guard = (fence) => ({ updateOne: { filter: { _id: fence }, update: { $inc: { fence: 1 } } } });
const replace = (w) => ({ replaceOne: { filter: { _id: w._id }, replacement: w, upsert: true } });

/** The ordered bulks a shape sends for `writes`. */
function bulksOf(shape, writes, fence) {
  const [name, k] = shape.split(':');
  const size = name === 'per-page' ? 1 : name === 'chunk' ? writes.length : Number(k);
  const out = [];
  for (let i = 0; i < writes.length; i += size) {
    const group = writes.slice(i, i + size);
    out.push(name === 'shared' ? [guard(fence), ...group.map(replace)] : group.flatMap((w) => [guard(fence), replace(w)]));
  }
  return out;
}

async function send(coll, bulks) {
  for (const ops of bulks) await coll.bulkWrite(ops, { ordered: true });
}

const fmt = (n, d = 0) => n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });

async function main() {
  const svc = privateStore(INSTANCE, args);
  const client = new MongoClient(svc.url, { socketTimeoutMS: 120_000, serverSelectionTimeoutMS: 30_000 });
  try {
    await client.connect();
    if (args.wal) return await wal(client, svc);
    const db = client.db('page_writes');
    const pages = db.collection('event_pages');
    // The claim of epoch 1 (held) exists; the guard is on epoch 2's claim (absent: matches nothing).
    await pages.insertOne({ _id: '#claim:t:0:1', fence: 'claimed' });
    const fence = '#claim:t:0:2';
    // Every stream's page stored once: the rounds replace documents that exist, as in steady state.
    for (let i = 0; i < STREAMS; i += 100) await send(pages, bulksOf('chunk', Array.from({ length: 100 }, (_, j) => pageDoc(i + j, 350)), fence));

    const cpu = Object.fromEntries(SHAPES.map((s) => [s, { ticks: 0, ms: 0, chunks: 0, commands: 0, writes: 0, bytes: 0 }]));
    const m0 = machineTicks();
    for (let r = 0; r < ROUNDS; r++) {
      for (const shape of r % 2 ? [...SHAPES].reverse() : SHAPES) {
        const chunks = Array.from({ length: CHUNKS }, () => chunkWrites());
        const t0 = ticks(svc.pid);
        const w0 = performance.now();
        for (const writes of chunks) {
          const bulks = bulksOf(shape, writes, fence);
          await send(pages, bulks);
          cpu[shape].commands += bulks.length;
          cpu[shape].writes += writes.length;
          for (const w of writes) cpu[shape].bytes += w.packed ? w.packed.length() : 100;
        }
        cpu[shape].ms += performance.now() - w0;
        cpu[shape].ticks += ticks(svc.pid) - t0;
        cpu[shape].chunks += CHUNKS;
      }
    }
    const m1 = machineTicks();
    const cores = ((m1.busy - m0.busy) / (m1.total - m0.total)) * (await import('node:os')).cpus().length;
    console.log(`\nFenced page writes: ${PAGES} writes per chunk (${fmt(EVENTS)} events), ${ROUNDS} rounds x ${CHUNKS} chunks per shape; machine ${cores.toFixed(2)} cores busy meanwhile`);
    console.log('shape        commands/chunk  avg KB/write  FerretDB µs/chunk  µs/write  µs/event  wall ms/chunk');
    for (const [shape, c] of Object.entries(cpu)) {
      const us = (c.ticks / ticksPerSecond) * 1e6;
      console.log(
        `${shape.padEnd(12)} ${fmt(c.commands / c.chunks, 1).padStart(14)}  ${fmt(c.bytes / c.writes / 1024, 1).padStart(12)}  ${fmt(us / c.chunks).padStart(17)}  ${fmt(us / c.writes).padStart(8)}  ${fmt(us / c.chunks / EVENTS).padStart(8)}  ${fmt(c.ms / c.chunks, 1).padStart(13)}`,
      );
    }

    // The fence in every shape: a newer claim makes the bulk fail at its first guard, and nothing after it lands.
    await pages.insertOne({ _id: fence, fence: 'claimed' });
    for (const shape of SHAPES) {
      const writes = chunkWrites().map((w) => ({ ...w, marker: shape }));
      let index = null;
      try {
        await send(pages, bulksOf(shape, writes, fence));
      } catch (err) {
        index = err.writeErrors?.[0]?.index ?? err.writeErrors?.index ?? `no writeErrors (${err.message})`;
      }
      const landed = await pages.countDocuments({ _id: { $in: writes.map((w) => w._id) }, marker: shape });
      console.log(`fence ${shape}: refused at statement ${index}, writes landed after the refusal: ${landed}`);
    }
    await pages.deleteOne({ _id: fence });

    await indexes(db, svc.pid);
    await hang(svc.url);
  } finally {
    await client.close();
    svc.down();
  }
}

/** Per shape: 4 concurrent writers for --wal seconds; FerretDB CPU per write and the WAL's largest size. */
async function wal(client, svc) {
  const seconds = Number(args.wal);
  console.log(`4 concurrent writers, ${seconds} s per shape, ${PAGES} writes per chunk`);
  for (const shape of SHAPES) {
    const name = `wal_${shape.replace(':', '_')}`;
    const db = client.db(name);
    await db.dropDatabase();
    const pages = db.collection('event_pages');
    await pages.insertOne({ _id: '#claim:t:0:1', fence: 'claimed' });
    const fence = '#claim:t:0:2';
    for (let i = 0; i < STREAMS; i += 8) await send(pages, bulksOf('group:8', Array.from({ length: 8 }, (_, j) => pageDoc(i + j, 350)), fence));
    const file = join(svc.dataDir, `${name}.sqlite-wal`);
    let maxWal = 0;
    let writes = 0;
    const end = Date.now() + seconds * 1000;
    const sampler = setInterval(() => {
      try {
        maxWal = Math.max(maxWal, statSync(file).size);
      } catch {
        // not created yet
      }
    }, 250);
    const t0 = ticks(svc.pid);
    await Promise.all(
      Array.from({ length: 4 }, async () => {
        while (Date.now() < end) {
          const chunk = chunkWrites();
          await send(pages, bulksOf(shape, chunk, fence));
          writes += chunk.length;
        }
      }),
    );
    clearInterval(sampler);
    const us = ((ticks(svc.pid) - t0) / ticksPerSecond) * 1e6;
    console.log(`${shape.padEnd(10)} ${fmt(writes)} writes, FerretDB ${fmt(us / writes)} µs/write (${fmt((us / writes) * (PAGES / EVENTS))} µs/event), WAL largest ${fmt(maxWal / 1e6, 1)} MB`);
  }
}

/** One update command of n fenced replaces of existing documents, each on a database of its own: does it answer? */
async function hang(url) {
  console.log('');
  for (const n of HANG) {
    const seed = new MongoClient(url);
    const coll = seed.db(`hang_${n}`).collection('p');
    const writes = Array.from({ length: n }, (_, i) => pageDoc(i, 2000));
    await send(coll, bulksOf('group:8', writes, '#claim:t:0:2')); // stored first, 8 at a time
    await seed.close();
    const probe = new MongoClient(url, { socketTimeoutMS: 15_000 });
    const t0 = performance.now();
    let outcome;
    try {
      await send(probe.db(`hang_${n}`).collection('p'), bulksOf('chunk', writes, '#claim:t:0:2'));
      outcome = 'answered';
    } catch (err) {
      outcome = `no answer (${err.name})`;
    } finally {
      await probe.close(true).catch(() => {});
    }
    console.log(`one command of ${n} fenced replaces of existing documents (${2 * n} statements): ${outcome} after ${fmt(performance.now() - t0)} ms`);
  }
}

/** FerretDB CPU per event of inserting the events (insertMany of 500, ordered) with and without the two secondary indexes. */
async function indexes(db, pid) {
  const keys = [
    { key: { account_id: 1, partition: 1, offset: 1 }, name: 'account_position' },
    { key: { account_id: 1, type: 1, partition: 1, offset: 1 }, name: 'account_type_position' },
  ];
  const withIdx = db.collection('events_indexed');
  const without = db.collection('events_bare');
  await withIdx.createIndexes(keys);
  await db.createCollection('events_bare');
  let offset = 0;
  const batch = () =>
    Array.from({ length: EVENTS }, () => {
      offset += 1;
      const account = `acct-${Math.floor(Math.random() * 1000)}`;
      return {
        _id: randomBytes(12).toString('hex'),
        account_id: account,
        type: Math.random() < 0.8 ? 'message.sent' : 'message.delivered',
        data: { from: '+14155550123', to: '+14155550199', channel: 'sms', text: 'Running about ten minutes late, see you at the usual place. Traffic on the bridge again.' },
        created_at: new Date(),
        partition: 0,
        offset,
        cursor: `0-${offset}`,
      };
    });
  const res = { indexed: { ticks: 0, n: 0 }, bare: { ticks: 0, n: 0 } };
  for (let r = 0; r < ROUNDS * 2; r++) {
    for (const [name, coll] of r % 2 ? [['bare', without], ['indexed', withIdx]] : [['indexed', withIdx], ['bare', without]]) {
      const docs = batch();
      const t0 = ticks(pid);
      await coll.insertMany(docs, { ordered: true });
      res[name].ticks += ticks(pid) - t0;
      res[name].n += docs.length;
    }
  }
  const us = (x) => ((x.ticks / ticksPerSecond) * 1e6) / x.n;
  console.log(`\nEvents insertMany (${EVENTS} per command, ~350 B each), ${res.indexed.n} events each, FerretDB µs/event: with the two indexes ${fmt(us(res.indexed))}, without ${fmt(us(res.bare))} (difference ${fmt(us(res.indexed) - us(res.bare))})`);
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
