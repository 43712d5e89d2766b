// Scenario 7: what an API pod costs. The same steady ingest goes into API
// process A, first with A alone (plus one delivery process), then with two
// more API processes on the same topic and database: B holds long-polls and
// SSE streams on a few accounts, C holds nothing and runs without the
// materializer (MATERIALIZER_ENABLED=false, the reader-only pod of
// docs/scaling.md), so its cost is the pod's alone. Reported: each process's
// cores per 1,000 events/s of service-wide ingest, what each added pod costs
// (the three pods' API CPU minus the one pod's, per added pod: a pod's
// materializer share moves, it is not added), the live latency of B's
// readers, and the materializer's backlog after a burst at a higher rate,
// three pods (A and B materialize) against one. Every window also reports the machine's busy cores:
// the machine is shared, so compare figures of runs made close together.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MongoClient } from 'mongodb';
import { ensureAccounts } from '../lib/accounts.mjs';
import { cpuShare, servicePids, settle } from '../lib/cpu-share.mjs';
import { accountIds } from '../lib/events.mjs';
import { kafkaAdmin } from '../lib/kafka.mjs';
import { benchDir } from '../lib/paths.mjs';
import { startNode } from '../lib/proc.mjs';
import { INGEST_TOKEN, startApi, startDelivery } from '../lib/services.mjs';
import { median, percentile, sleep } from '../lib/stats.mjs';
import { waitOpen } from './live.mjs';

export const title = 'Pods (ingest on A, readers on B, C idle, one delivery process): CPU per pod, materializer lag';
/** Steady ingest, events/s, in requests of BATCH events (the pod cost is per event, not per request). */
const RATE = 1000;
const BATCH = 10;
/** Accounts with readers on B, and how many readers each. */
const READ_ACCOUNTS = 20;
const LONG_POLLS = 2;
const STREAMS = 1;
/** Other accounts the ingest spreads over (every partition gets events). */
const OTHER_ACCOUNTS = 480;
/** FANOUT_DORMANT_MS of the pods: short, so a pod without readers is dormant by the time it is measured. */
const DORMANT_MS = 5000;

export async function run(ctx) {
  const seconds = ctx.quick ? 10 : 20;
  const lagRate = ctx.quick ? 2000 : 4000;
  const lagSeconds = ctx.quick ? 5 : 20;
  const topic = ctx.topic('pods');
  const podEnv = { FANOUT_DORMANT_MS: String(DORMANT_MS) };
  const [a, delivery] = await Promise.all([startApi(ctx, { name: 'api-a', topic, env: podEnv }), startDelivery(ctx, { name: 'delivery', topic })]);
  const accounts = await ensureAccounts(ctx, a.url, READ_ACCOUNTS);
  const ids = [...accounts.map((x) => x.id), ...accountIds(`pods${ctx.runId}`, OTHER_ACCOUNTS)];
  const pacer = startNode('pacer', [join(benchDir, 'workers', 'pacer.mjs')], { logFile: join(ctx.scratch, 'pods-pacer.log') });
  const infra = servicePids();
  const backlog = backlogOf(ctx, topic);
  let b = null;
  let c = null;
  let readers = null;

  const ingest = async (rate, secs, batch) => {
    await pacer.request('start', { url: a.url, token: INGEST_TOKEN, rate, seconds: secs, accounts: ids, batch });
    return pacer.request('finish', {}, (secs + 120) * 1000);
  };
  const quiet = async (what) => {
    // The materializer must have written what the previous window left before the next starts.
    await backlog.drained(120_000);
    const s = await settle({ cores: 0.6, maxMs: ctx.quick ? 15_000 : 60_000 });
    ctx.log(`${s.settled ? 'quiet' : `NOT quiet (${s.busy} cores busy)`} after ${(s.waitedMs / 1000).toFixed(1)} s, before ${what}`);
  };
  /** One steady window: cores of each process per 1,000 events/s. */
  const steady = async (label) => {
    await quiet(label);
    if (readers) await Promise.all(readers.map((w) => w.request('take')));
    const pods = { 'api-a': a, ...(b ? { 'api-b': b } : {}), ...(c ? { 'api-c': c } : {}) };
    // At rest first (no ingest): each process's floor.
    const rest = cpuShare(Object.fromEntries(Object.entries(pods).map(([n, p]) => [n, p.child.pid])));
    await sleep(5000);
    const floor = rest.stop().processes;
    const share = cpuShare({ ...Object.fromEntries(Object.entries(pods).map(([n, p]) => [n, p.child.pid])), delivery: delivery.child.pid, pacer: pacer.pid, ...infra });
    const paced = await profileAll(ctx, Object.values(pods), label, () => ingest(RATE, seconds, BATCH));
    const cpu = share.stop();
    const rate = paced.sent / seconds;
    const perK = Object.fromEntries(Object.entries(cpu.processes).map(([n, cores]) => [n, cores / (rate / 1000)]));
    // Above the floor: what the ingest costs each pod.
    const slope = Object.fromEntries(Object.entries(floor).map(([n, cores]) => [n, ((cpu.processes[n] ?? 0) - cores) / (rate / 1000)]));
    const dormant = Object.fromEntries(Object.keys(pods).map((n) => [n, isDormant(ctx, n)]));
    let live = null;
    if (readers) {
      await sleep(1000);
      const taken = await Promise.all(readers.map((w) => w.request('take')));
      const all = taken.flatMap((t) => [...t.latency.longpoll, ...t.latency.stream]);
      live = { p50: percentile(all, 50), p99: percentile(all, 99), received: all.length, errors: taken.reduce((s, t) => s + t.errors, 0) };
    }
    ctx.log(
      `${label}: ${rate.toFixed(0)} ev/s (${paced.errors} errors); cores ${fmtCores(cpu.processes)}; at rest ${fmtCores(floor)}; fan-out dormant: ${JSON.stringify(dormant)}; machine ${cpu.machine?.toFixed(2)} cores busy` +
        (live ? `; B's readers p50/p99 ${live.p50?.toFixed(1)}/${live.p99?.toFixed(1)} ms over ${live.received} events (${live.errors} errors)` : ''),
    );
    return { rate, cores: cpu.processes, floor, perK, slope, dormant, machine: cpu.machine, live };
  };
  /** A burst above what the materializer writes: its backlog at the end, and how long it takes to drain. */
  const burst = async (label) => {
    await quiet(label);
    const share = cpuShare({ 'api-a': a.child.pid, ...(b ? { 'api-b': b.child.pid, 'api-c': c.child.pid } : {}), ...infra });
    const paced = await ingest(lagRate, lagSeconds, 100);
    const left = await backlog.now();
    const cpu = share.stop();
    const t0 = Date.now();
    await backlog.drained(300_000);
    const drainSeconds = (Date.now() - t0) / 1000;
    ctx.log(`${label}: ${paced.sent} events in ${lagSeconds} s (${paced.errors} errors); materializer backlog at the end ${left}, drained in ${drainSeconds.toFixed(1)} s; cores ${fmtCores(cpu.processes)}; machine ${cpu.machine?.toFixed(2)} busy`);
    return { sent: paced.sent, backlog: left, drainSeconds, cores: cpu.processes, machine: cpu.machine };
  };

  ctx.log('one pod: warming up');
  await ingest(RATE, 3, BATCH);
  const one = [];
  const oneBurst = [];
  for (let r = 0; r < ctx.runs; r++) {
    one.push(await steady(`one pod, run ${r + 1}`));
    oneBurst.push(await burst(`one pod, burst ${r + 1}`));
  }

  ctx.log('three pods: starting B and C, readers on B');
  [b, c] = await Promise.all([startApi(ctx, { name: 'api-b', topic, env: podEnv }), startApi(ctx, { name: 'api-c', topic, env: { ...podEnv, MATERIALIZER_ENABLED: 'false' } })]);
  readers = [startNode('readers', [join(benchDir, 'workers', 'waiters.mjs')], { logFile: join(ctx.scratch, 'pods-readers.log') })];
  await readers[0].request('open', { url: b.url, accounts: accounts.map(({ id, token }) => ({ id, credential: token })), longPolls: LONG_POLLS, streams: STREAMS });
  await waitOpen(ctx, readers.map((child) => ({ child })), READ_ACCOUNTS * STREAMS);
  ctx.log('three pods: warming up (the materializer group rebalances over A and B)');
  await ingest(RATE, 3, BATCH);
  await sleep(DORMANT_MS + 1000);
  const three = [];
  const threeBurst = [];
  for (let r = 0; r < ctx.runs; r++) {
    three.push(await steady(`three pods, run ${r + 1}`));
    threeBurst.push(await burst(`three pods, burst ${r + 1}`));
  }
  await readers[0].request('close');
  await Promise.all([a.child.stop(), b.child.stop(), c.child.stop(), delivery.child.stop(), pacer.stop(), readers[0].stop()]);
  await backlog.close();

  const med = (runs, name) => median(runs.map((m) => m.perK[name]));
  const oneA = med(one, 'api-a');
  const apiSum = (m) => m.perK['api-a'] + m.perK['api-b'] + m.perK['api-c'];
  const addedPod = (median(three.map(apiSum)) - oneA) / 2;
  const backlog1 = median(oneBurst.map((m) => m.backlog));
  const backlog3 = median(threeBurst.map((m) => m.backlog));
  const liveP99 = median(three.map((m) => m.live?.p99));
  const machine = (runs) => median(runs.map((m) => m.machine));
  const unit = 'cores per 1,000 ev/s';
  const machineRef = (runs) => ({ label: 'machine busy cores during the windows', value: machine(runs), unit: 'cores' });
  return {
    rows: [
      { id: 'pods.one.a', label: `7 API CPU, 1 pod (takes the ingest) @ ${RATE} ev/s`, value: oneA, unit, reference: machineRef(one), ratio: null },
      { id: 'pods.three.a', label: '7 API CPU, 3 pods: A (takes the ingest)', value: med(three, 'api-a'), unit, reference: machineRef(three), ratio: null },
      { id: 'pods.three.b', label: `7 API CPU, 3 pods: B (${READ_ACCOUNTS * (LONG_POLLS + STREAMS)} readers)`, value: med(three, 'api-b'), unit, reference: null, ratio: null },
      { id: 'pods.three.c', label: '7 API CPU, 3 pods: C (no readers, MATERIALIZER_ENABLED=false)', value: med(three, 'api-c'), unit, reference: null, ratio: null },
      {
        id: 'pods.three.c.slope',
        label: '7 API CPU of C above its floor at rest (what the ingest costs a pod without readers)',
        value: median(three.map((m) => m.slope['api-c'])),
        unit,
        reference: { label: 'C at rest', value: median(three.map((m) => m.floor['api-c'])), unit: 'cores' },
        ratio: null,
        target: { valueAtMost: 0.02, unit },
      },
      { id: 'pods.added', label: '7 API CPU each added pod costs ((A+B+C) - A alone) / 2', value: addedPod, unit, reference: { label: 'A alone', value: oneA, unit }, ratio: addedPod / oneA },
      { id: 'pods.live.p99', label: '7 live p99 of B\'s readers, 3 pods', value: liveP99, unit: 'ms', reference: null, ratio: null, target: { valueAtMost: 25, unit: 'ms' } },
      {
        id: 'pods.lag',
        label: `7 materializer backlog after ${lagSeconds} s at ${lagRate} ev/s, 3 pods (A and B materialize)`,
        value: backlog3,
        unit: 'events',
        reference: { label: 'same, 1 pod', value: backlog1, unit: 'events' },
        ratio: backlog1 > 0 ? backlog3 / backlog1 : null,
      },
    ],
    runs: { one, oneBurst, three, threeBurst },
    notes: { dormantMs: DORMANT_MS, rate: RATE, batch: BATCH, seconds, lagRate, lagSeconds, readAccounts: READ_ACCOUNTS, readers: READ_ACCOUNTS * (LONG_POLLS + STREAMS), otherAccounts: OTHER_ACCOUNTS, machineBusyOne: machine(one), machineBusyThree: machine(three) },
  };
}

const fmtCores = (processes) =>
  Object.entries(processes)
    .map(([n, v]) => `${n} ${v.toFixed(2)}`)
    .join(', ');

/** --profile pods: a CPU profile of every API process over the window. */
async function profileAll(ctx, pods, label, fn) {
  let run = fn;
  for (const pod of pods) {
    const inner = run;
    run = () => ctx.profiled(pod.child, label.replace(/[^a-z0-9]+/gi, '-'), inner);
  }
  return run();
}

/** The materializer's backlog: the log's end offsets against the watermarks it writes in MongoDB. */
function backlogOf(ctx, topic) {
  const admin = kafkaAdmin(ctx.services.KAFKA_BROKERS);
  const mongo = new MongoClient(ctx.services.MONGO_URL);
  const ready = Promise.all([admin.connect(), mongo.connect()]);
  const now = async () => {
    await ready;
    const ends = await admin.fetchTopicOffsets(topic);
    // The id of api/src/event-store/watermarks.ts watermarkId (the bench runs plain JS, not the service's TypeScript).
    const docs = await mongo.db(ctx.db).collection('watermarks').find({ _id: { $in: ends.map((p) => `${topic}:${p.partition}`) } }, { projection: { offset: 1 } }).toArray();
    const at = new Map(docs.map((d) => [d._id, Number(d.offset)]));
    return ends.reduce((left, p) => left + Math.max(0, Number(p.high) - 1 - (at.get(`${topic}:${p.partition}`) ?? -1)), 0);
  };
  return {
    now,
    async drained(timeoutMs) {
      const deadline = Date.now() + timeoutMs;
      while ((await now()) > 0 && Date.now() < deadline) await sleep(250);
    },
    close: () => Promise.allSettled([admin.disconnect(), mongo.close()]),
  };
}

/** Whether the pod's fan-out is dormant, from its log (the last of "fan-out dormant" / "fan-out awake"). */
function isDormant(ctx, name) {
  try {
    const log = readFileSync(join(ctx.scratch, `${ctx.scenario}-${name}.log`), 'utf8');
    return log.lastIndexOf('fan-out dormant') > log.lastIndexOf('fan-out awake');
  } catch {
    return null;
  }
}
