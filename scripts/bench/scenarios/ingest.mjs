// Scenario 1: events/s acknowledged by one API process through
// POST /internal/v1/events, (a) one event per request at 64 connections,
// (b) 100-event batches. References in the same run: a bare Koa app under the
// same autocannon load (the HTTP ceiling) and Kafka's ProducerPerformance with
// the same record size and acks=all on the same broker.
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { cpuShare, formatShare, servicePids, settle } from '../lib/cpu-share.mjs';
import { accountIds, envelopeBytes, eventBody } from '../lib/events.mjs';
import { MongoClient } from 'mongodb';
import { createTopic, kafkaAdmin, producerPerformance } from '../lib/kafka.mjs';
import { benchDir, infraRunDir } from '../lib/paths.mjs';
import { freePort, startNode, waitHttp } from '../lib/proc.mjs';
import { INGEST_TOKEN, startApi } from '../lib/services.mjs';
import { median } from '../lib/stats.mjs';

export const title = 'Ingest throughput';

export async function run(ctx) {
  const { quick } = ctx;
  const seconds = quick ? 3 : 5;
  const accounts = accountIds(`ing${ctx.runId}`, 1000);
  const singles = accounts.map((a, i) => JSON.stringify(eventBody(a, i)));
  const batches = Array.from({ length: 40 }, (_, b) => JSON.stringify({ events: Array.from({ length: 100 }, (_, i) => eventBody(accounts[(b * 100 + i * 7) % accounts.length], i)) }));
  const headers = { 'content-type': 'application/json', authorization: `Bearer ${INGEST_TOKEN}` };

  const refTopic = ctx.topic('producer-perf');
  await createTopic(ctx.services.KAFKA_BROKERS, refTopic, 12);
  const ingestTopic = ctx.topic('ingest');
  const api = await startApi(ctx, { name: 'api', topic: ingestTopic });
  const koaPort = await freePort();
  const koa = startNode('bare-koa', [join(benchDir, 'workers', 'bare-koa.mjs')], { env: { PORT: String(koaPort) }, probe: true, logFile: join(ctx.scratch, 'ingest-bare-koa.log') });
  const koaUrl = `http://127.0.0.1:${koaPort}`;
  await waitHttp(koaUrl, koa);
  const cannon = startNode('cannon', [join(benchDir, 'workers', 'cannon.mjs')], { logFile: join(ctx.scratch, 'ingest-cannon.log') });

  const load = (url, connections, bodies, secs = seconds) => cannon.request('run', { url: `${url}/internal/v1/events`, connections, seconds: secs, method: 'POST', headers, bodies }, (secs + 30) * 1000);
  const recordSize = envelopeBytes(accounts[0]);

  ctx.log(`warming up (record size ${recordSize} B)`);
  await load(koaUrl, 64, singles, 2);
  await load(api.url, 64, singles, 2);
  await load(api.url, 16, batches, 2);

  // Where the 2 cores go in each load: the process under test, the load generator, and the services the API needs.
  const services = servicePids();
  const shared = (under) => cpuShare({ [under.name]: under.pid, cannon: cannon.pid, ...(under === koa ? { api: api.child.pid } : {}), ...services });
  // Each load starts on a quiet machine: the API's materializer writes what the previous load produced for a while after it (1b leaves ~100,000 events).
  const quiet = async (what) => {
    const s = await settle();
    ctx.log(`${s.settled ? 'quiet' : `NOT quiet (${s.busy} cores busy)`} after ${(s.waitedMs / 1000).toFixed(1)} s, before ${what}`);
  };
  const samples = { koa: [], single: [], batch: [], kafka: [], apiCpuSingle: [], apiCpuBatch: [], cpuKoa: [], cpuSingle: [], cpuBatch: [], cpuDrain: [], materialized: [], diskPerEvent: [] };
  for (let r = 0; r < ctx.runs; r++) {
    await quiet('bare Koa');
    let share = shared(koa);
    const k = await load(koaUrl, 64, singles);
    samples.cpuKoa.push(share.stop());
    samples.koa.push(k.rps);

    await quiet('1a');
    await api.child.request('stats', { reset: true });
    share = shared(api.child);
    const a = await ctx.profiled(api.child, `single-${r}`, () => load(api.url, 64, singles));
    samples.cpuSingle.push(share.stop());
    samples.apiCpuSingle.push((await api.child.request('stats', { reset: true })).cpu);
    samples.single.push(a.non2xx + a.errors > 0 ? NaN : a.rps);

    await quiet('1b');
    await api.child.request('stats', { reset: true });
    share = shared(api.child);
    const b = await ctx.profiled(api.child, `batch-${r}`, () => load(api.url, 16, batches));
    samples.cpuBatch.push(share.stop());
    samples.apiCpuBatch.push((await api.child.request('stats', { reset: true })).cpu);
    samples.batch.push(b.non2xx + b.errors > 0 ? NaN : b.rps * 100);
    ctx.log(`run ${r + 1}, cores used: bare Koa: ${formatShare(samples.cpuKoa.at(-1))}; 1a: ${formatShare(samples.cpuSingle.at(-1))}; 1b: ${formatShare(samples.cpuBatch.at(-1))}`);

    // What 1b acknowledged faster than the materializer writes it: how fast the backlog drains is the rate events become history on this machine.
    share = cpuShare({ api: api.child.pid, ...services });
    const drain = await drainRate(ctx, ingestTopic);
    samples.cpuDrain.push(share.stop());
    samples.materialized.push(drain.rate);
    ctx.log(`run ${r + 1}: the materializer wrote a backlog of ${drain.written} events in ${(drain.ms / 1000).toFixed(1)} s: ${drain.rate.toFixed(0)} events/s; cores used: ${formatShare(samples.cpuDrain.at(-1))}`);
    const disk = storeDisk(ctx.db);
    if (disk && drain.stored > 0) {
      samples.diskPerEvent.push((disk.data + disk.wal) / drain.stored);
      ctx.log(`run ${r + 1}: the store holds ${drain.stored} events in ${mb(disk.data)} of data + ${mb(disk.wal)} of WAL: ${samples.diskPerEvent.at(-1).toFixed(0)} B per stored event`);
    }
    await quiet('the Kafka tool');
    const p = await producerPerformance(ctx.services.KAFKA_BROKERS, refTopic, { records: quick ? 150_000 : 400_000, recordSize });
    samples.kafka.push(p.recordsPerSec);
    ctx.log(`run ${r + 1}: bare Koa ${k.rps.toFixed(0)} req/s; ingest (a) ${a.rps.toFixed(0)} ev/s (non-2xx ${a.non2xx}, errors ${a.errors}); (b) ${(b.rps * 100).toFixed(0)} ev/s (non-2xx ${b.non2xx}); ProducerPerformance ${p.recordsPerSec.toFixed(0)} rec/s`);
  }
  await Promise.all([api.child.stop(), koa.stop(), cannon.stop()]);

  const single = median(samples.single);
  const batch = median(samples.batch);
  const koaRps = median(samples.koa);
  const kafka = median(samples.kafka);
  return {
    rows: [
      {
        id: 'ingest.single',
        label: '1a ingest, 1 event/request, 64 conns',
        value: single,
        unit: 'events/s',
        reference: { label: 'bare Koa {} (same load)', value: koaRps, unit: 'req/s' },
        ratio: single / koaRps,
        target: { ratioAtLeast: 0.5 },
      },
      {
        id: 'ingest.batch',
        label: '1b ingest, 100-event batches, 16 conns',
        value: batch,
        unit: 'events/s',
        reference: { label: `Kafka ProducerPerformance (${recordSize} B, acks=all)`, value: kafka, unit: 'records/s' },
        ratio: batch / kafka,
        target: { ratioAtLeast: 0.4 },
      },
      {
        id: 'ingest.materialized',
        label: '1c events written to history per second (the materializer draining 1b)',
        value: median(samples.materialized),
        unit: 'events/s',
      },
    ],
    samples,
    notes: {
      recordSize,
      seconds,
      apiCpuSingle: median(samples.apiCpuSingle),
      apiCpuBatch: median(samples.apiCpuBatch),
      // Disk per stored event right after the drain: the database file and its WAL (local FerretDB only).
      diskBytesPerStoredEvent: samples.diskPerEvent.length > 0 ? median(samples.diskPerEvent) : null,
      // Cores used by each process during the loads (median over the runs): what else the machine did while the API was measured.
      coresDuring: { bareKoa: medianShare(samples.cpuKoa), single: medianShare(samples.cpuSingle), batch: medianShare(samples.cpuBatch), drain: medianShare(samples.cpuDrain) },
    },
  };
}

const mb = (bytes) => `${(bytes / 2 ** 20).toFixed(1)} MB`;

/**
 * The bytes the local FerretDB keeps for database `db`: its SQLite file and the file's WAL
 * (scripts/infra/up.sh: <run>/ferretdb-data/<db>.sqlite); null when the store is not ours (MONGO_URL elsewhere).
 */
function storeDisk(db) {
  const file = join(infraRunDir, 'ferretdb-data', `${db}.sqlite`);
  const size = (f) => {
    try {
      return statSync(f).size;
    } catch {
      return null;
    }
  };
  const data = size(file);
  return data === null ? null : { data, wal: size(`${file}-wal`) ?? 0 };
}

function medianShare(shares) {
  const names = [...new Set(shares.flatMap((s) => Object.keys(s.processes)))];
  return {
    machine: median(shares.map((s) => s.machine).filter((v) => v !== undefined)),
    ...Object.fromEntries(names.map((n) => [n, median(shares.map((s) => s.processes[n]).filter((v) => v !== undefined))])),
  };
}

/**
 * Right after a load: the materializer's backlog (the log's end offsets against
 * the watermarks it writes in MongoDB) and how fast it drains to nothing.
 */
async function drainRate(ctx, topic) {
  const admin = kafkaAdmin(ctx.services.KAFKA_BROKERS);
  const mongo = new MongoClient(ctx.services.MONGO_URL);
  await Promise.all([admin.connect(), mongo.connect()]);
  try {
    const ends = (await admin.fetchTopicOffsets(topic)).map((p) => ({ partition: p.partition, last: Number(p.high) - 1 }));
    const watermarks = mongo.db(ctx.db).collection('watermarks');
    const backlog = async () => {
      let left = 0;
      for (const { partition, last } of ends) {
        // The id of api/src/event-store/watermarks.ts watermarkId (the bench runs plain JS, not the service's TypeScript).
        const doc = await watermarks.findOne({ _id: `${topic}:${partition}` }, { projection: { offset: 1 } });
        left += Math.max(0, last - (doc ? Number(doc.offset) : -1));
      }
      return left;
    };
    const started = performance.now();
    const first = await backlog();
    for (;;) {
      const left = await backlog();
      const ms = performance.now() - started;
      // stored: every event of the topic but those still to write (the database holds this scenario's events only).
      if (left === 0 || ms > 300_000) return { written: first - left, stored: ends.reduce((n, e) => n + e.last + 1, 0) - left, ms: Math.round(ms), rate: ((first - left) / ms) * 1000 };
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  } finally {
    await Promise.allSettled([admin.disconnect(), mongo.close()]);
  }
}
