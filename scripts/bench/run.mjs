#!/usr/bin/env node
// `npm run bench`: runs every scenario against locally started
// services (scripts/infra), each figure the median of several runs beside a
// reference limit measured in the same run, prints a table and writes
// bench/results.json (a full run) or bench/last-run.tmp (--quick / --only).
//
//   npm run bench                      all scenarios, full length
//   npm run bench -- --quick           shorter windows, one run each
//   npm run bench -- --only ingest,lag scenarios by name (ingest lag live idle waiter-bytes webhooks polling sustained pods)
//   npm run bench -- --runs 5          runs per figure (default 3, quick 1)
//   npm run bench -- --profile ingest  CPU profiles of the measured processes into bench/run.tmp/
//                                      (--profile idle: a heap snapshot of the API holding the readers too)
//   npm run bench -- --only waiter-bytes heap bytes per held long-poll and per stream
//   npm run bench -- --runner dist     run the compiled dist/ (npm run build) instead of tsx
//   npm run bench -- --node-args=--max-semi-space-size=4  node options (space-separated) for the measured service processes
//   npm run bench -- --only live --quick --live-steps
//                                      scenario 3 also reports each step of a live event's path (p50/p99, ms since sent)
//   npm run bench -- --only sustained --rate 1000,5000 --seconds 120
//                                      sustained ingest at each rate (default 5000/s for 600 s, --quick 60 s)
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { MongoClient } from 'mongodb';
import { ensureServices } from '../infra/services.mjs';
import { dropKafka, KAFKA_VERSION } from './lib/kafka.mjs';
import { resultsFile, root, scratchDir } from './lib/paths.mjs';
import { renderResults, withResults } from './lib/results-table.mjs';
import { stopAll } from './lib/proc.mjs';
import { printTable, judge } from './lib/report.mjs';

const SCENARIOS = ['ingest', 'lag', 'live', 'idle', 'waiter-bytes', 'webhooks', 'polling', 'sustained', 'pods'];
/** Scenarios that run only when named by --only (none at present). */
const EXTRA_SCENARIOS = [];
const NEEDED_FILES = 65_536;

const { values: opts } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    only: { type: 'string' },
    runs: { type: 'string' },
    profile: { type: 'string' },
    runner: { type: 'string', default: 'tsx' },
    'node-args': { type: 'string', default: '' },
    'keep-data': { type: 'boolean', default: false },
    'live-steps': { type: 'boolean', default: false },
    rate: { type: 'string' },
    seconds: { type: 'string' },
  },
});

raiseFileLimit();

const only = opts.only ? opts.only.split(',').map((s) => s.trim()) : SCENARIOS;
for (const name of only) if (!SCENARIOS.includes(name) && !EXTRA_SCENARIOS.includes(name)) fail(`unknown scenario "${name}" (have: ${[...SCENARIOS, ...EXTRA_SCENARIOS].join(', ')})`);
if (!['tsx', 'dist'].includes(opts.runner)) fail('--runner is tsx or dist');
const runs = opts.runs ? Number(opts.runs) : opts.quick ? 1 : 3;
const full = !opts.quick && !opts.only && runs >= 3;

mkdirSync(scratchDir, { recursive: true });
const runId = randomBytes(3).toString('hex');
const started = Date.now();
const services = await ensureServices();
const ctx = {
  runId,
  services,
  /** The running scenario's database: each scenario has its own, so one's leftovers cannot slow the next. */
  db: `bench_${runId}`,
  /** Every database of the run (the scenarios' and any a scenario made besides), dropped at the end. */
  extraDatabases: [],
  scratch: scratchDir,
  quick: opts.quick,
  runs,
  runner: opts.runner,
  /** Extra node options for the measured service processes (--node-args "--max-semi-space-size=4"). */
  execArgv: opts['node-args'].split(' ').filter(Boolean),
  scenario: null,
  shared: {},
  /** Scenario settings from the command line (the sustained scenario's rates and window). */
  options: {
    rates: opts.rate ? opts.rate.split(',').map(Number) : undefined,
    seconds: opts.seconds ? Number(opts.seconds) : undefined,
    keepData: opts['keep-data'],
    liveSteps: opts['live-steps'],
  },
  topic: (name) => `bench-${runId}-${name}`,
  log: (msg) => console.error(`[bench ${((Date.now() - started) / 1000).toFixed(0).padStart(4)}s ${ctx.scenario ?? ''}] ${msg}`),
  /** True while --profile names the running scenario (it may write heap snapshots too). */
  get profiling() {
    return opts.profile !== undefined && opts.profile === ctx.scenario;
  },
  /** Runs fn under a CPU profile of `child` when --profile names this scenario. */
  async profiled(child, label, fn) {
    if (opts.profile !== ctx.scenario) return fn();
    await child.request('profileStart');
    try {
      return await fn();
    } finally {
      const file = join(scratchDir, `${ctx.scenario}-${child.name}-${label}.cpuprofile`);
      await child.request('profileStop', { file });
      ctx.log(`profile written: ${file}`);
    }
  },
};

// Ctrl-C / SIGTERM: stop the children and drop the run's data before leaving.
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.once(signal, () => {
    ctx.log(`${signal}: stopping`);
    stopAll()
      .then(() => (opts['keep-data'] ? undefined : cleanup()))
      .catch(() => undefined)
      .finally(() => process.exit(130));
  });
}

const machine = await describeMachine(services);
ctx.log(`run ${runId}: ${machine.cpus} cores, Node ${machine.node}, Kafka ${machine.kafka}, ${machine.mongo}; load average ${machine.loadAverageAtStart.join(' ')}`);
const results = {};
let failed = false;
try {
  for (const name of only) {
    ctx.scenario = name;
    ctx.db = `bench_${runId}_${name.replace(/[^a-z0-9]/g, '_')}`;
    ctx.extraDatabases.push(ctx.db);
    const t0 = Date.now();
    const mod = await import(`./scenarios/${name}.mjs`);
    ctx.log(`--- ${mod.title}`);
    try {
      results[name] = { title: mod.title, ...(await mod.run(ctx)), seconds: Math.round((Date.now() - t0) / 1000) };
    } catch (err) {
      failed = true;
      ctx.log(`FAILED: ${err.stack ?? err}`);
      results[name] = { title: mod.title, error: String(err.message ?? err), rows: [] };
    } finally {
      await stopAll();
    }
  }
} finally {
  await stopAll();
  ctx.scenario = null;
  if (!opts['keep-data']) await cleanup().catch((err) => ctx.log(`cleanup failed: ${err.message}`));
}

const rows = Object.values(results).flatMap((r) => r.rows.map(judge));
machine.loadAverageAtEnd = os.loadavg().map((x) => Math.round(x * 100) / 100);
const report = {
  generated_at: new Date().toISOString(),
  command: `npm run bench${process.argv.length > 2 ? ' -- ' + process.argv.slice(2).join(' ') : ''}`,
  runs_per_figure: runs,
  seconds: Math.round((Date.now() - started) / 1000),
  machine,
  rows,
  scenarios: results,
};
const out = full ? resultsFile : join(root, 'bench', 'last-run.tmp');
writeFileSync(out, JSON.stringify(report, null, 2) + '\n');
printTable(rows, report);
ctx.log(`wrote ${out}`);
if (full) {
  // The published figures: docs/performance.md's table is regenerated from them, never hand-copied.
  const doc = join(root, 'docs', 'performance.md');
  writeFileSync(doc, withResults(readFileSync(doc, 'utf8'), renderResults(report)));
  ctx.log(`rewrote the results table of ${doc}`);
}
process.exit(failed ? 1 : 0);

async function describeMachine({ MONGO_URL }) {
  const client = new MongoClient(MONGO_URL, { serverSelectionTimeoutMS: 5000 });
  let mongo;
  try {
    const info = await client.db('admin').command({ buildInfo: 1 });
    mongo = info.ferretdbVersion ? `FerretDB ${info.ferretdbVersion} (MongoDB wire ${info.version})` : `MongoDB ${info.version}`;
  } finally {
    await client.close();
  }
  return {
    cpus: os.cpus().length,
    cpuModel: os.cpus()[0]?.model ?? '?',
    memoryGb: Math.round(os.totalmem() / 2 ** 30),
    os: `${os.type()} ${os.release()}`,
    node: process.versions.node,
    kafka: `Apache Kafka ${KAFKA_VERSION} (KRaft, single broker)`,
    mongo,
    runner: opts.runner,
    nodeArgs: ctx.execArgv,
    loadAverageAtStart: os.loadavg().map((x) => Math.round(x * 100) / 100),
  };
}

async function cleanup() {
  const client = new MongoClient(services.MONGO_URL, { serverSelectionTimeoutMS: 5000 });
  try {
    for (const db of new Set(ctx.extraDatabases)) await client.db(db).dropDatabase();
  } finally {
    await client.close();
  }
  const dropped = await dropKafka(services.KAFKA_BROKERS, `bench-${runId}`);
  ctx.log(`dropped ${new Set(ctx.extraDatabases).size} databases, ${dropped.topics} topics and ${dropped.groups} consumer groups`);
}

/** Thousands of connections need file descriptors: re-run under a raised soft limit when the hard one allows. */
function raiseFileLimit() {
  if (process.env.BENCH_ULIMIT_RAISED) return;
  const probe = spawnSync('bash', ['-c', 'echo "$(ulimit -Sn) $(ulimit -Hn)"'], { encoding: 'utf8' });
  const [soft, hard] = (probe.stdout ?? '').trim().split(' ');
  const want = hard === 'unlimited' ? NEEDED_FILES : Math.min(NEEDED_FILES, Number(hard));
  if (!(Number(soft) < want)) return;
  const r = spawnSync('bash', ['-c', `ulimit -Sn ${want} && exec "$0" "$@"`, process.execPath, ...process.execArgv, ...process.argv.slice(1)], {
    stdio: 'inherit',
    env: { ...process.env, BENCH_ULIMIT_RAISED: '1' },
  });
  process.exit(r.status ?? 1);
}

function fail(msg) {
  console.error(`bench: ${msg}`);
  process.exit(2);
}
