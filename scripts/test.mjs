#!/usr/bin/env node
// `npm test`: brings up Kafka and the MongoDB-wire server (or uses KAFKA_BROKERS
// and MONGO_URL when both are set), runs mocha over every test (the unit and
// integration tests, and alongside them the fault tests), and ends with one line
// `tests: N passed, M failed` taken from mocha's results.
//   --unit    only the tests of pure logic next to the code (src/**/*.test.ts): no Kafka,
//             no FerretDB, a few seconds (`npm run test:unit`)
//   --quick   everything but the fault tests (the dev loop: `npm run test:unit`, then `npm run test:quick`)
//   --faults  only the fault tests (`npm run test:faults`)
//   --soak    only the soak, 600 s unless SOAK_SECONDS says otherwise (`npm run soak`)
//   --full    the fault tests at their full sizes (FAULTS_FULL=1; `npm run test:faults:full`)
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureTestTools } from './infra/test-tools.mjs';
import { ensureServices } from './infra/services.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const resultsFile = join(root, '.test-results.json');
// The query-shape check (shared/src/mongo/query-shapes.ts): every process of the run that talks to
// MongoDB through createMongo writes the shapes it sent here, one file per process.
const shapesDir = join(root, 'test-artifacts', 'query-shapes');

const MODES = ['--unit', '--quick', '--faults', '--soak', '--full'];
const argv = process.argv.slice(2);
const mode = new Set(argv.filter((a) => MODES.includes(a)));
const extra = argv.filter((a) => !MODES.includes(a));

const UNIT = ['{shared,api,delivery}/src/**/*.test.ts', 'scripts/test/**/*.test.ts'];
const TESTS = [...UNIT, '{shared,api,delivery}/test/**/*.test.ts', 'clients/typescript/test/**/*.test.ts'];
const FAULTS = ['api/test/faults/**/*.fault.ts'];
const SOAK = ['api/test/faults/soak.fault.ts'];
const DEFAULT_SPECS = mode.has('--unit') ? UNIT : mode.has('--soak') ? SOAK : mode.has('--faults') || mode.has('--full') ? FAULTS : mode.has('--quick') ? TESTS : [...TESTS, ...FAULTS];
const named = extra.filter((a) => !a.startsWith('-'));
const specs = named.length > 0 ? [] : DEFAULT_SPECS;

// The unit tests need no services; every other run needs Kafka and FerretDB, and the tools
// (Chromium, nginx, Compose) of the test files it includes.
// Both at once: a fresh machine builds FerretDB and installs the browser in the same minute or two.
const withIntegration = specs.includes(TESTS[TESTS.length - 1]);
let services = {};
let tools = {};
try {
  [services, tools] = await Promise.all([
    mode.has('--unit') ? {} : ensureServices(),
    mode.has('--unit') ? {} : ensureTestTools((files) => (named.length > 0 ? named.some((a) => files.some((f) => a.includes(f))) : withIntegration)),
  ]);
} catch (err) {
  console.error(`[setup] ${err.message}`);
  console.log('tests: 0 passed, 1 failed');
  process.exit(1);
}
const env = {
  ...process.env,
  ...services,
  ...tools,
  ...(mode.has('--soak') || mode.has('--full') ? { SOAK_SECONDS: process.env.SOAK_SECONDS ?? '600' } : {}),
  ...(mode.has('--full') ? { FAULTS_FULL: '1' } : {}),
  TEST_RUN_ID: process.env.TEST_RUN_ID ?? randomBytes(4).toString('hex'),
  TEST_RESULTS_FILE: resultsFile,
  ...(mode.has('--unit') ? {} : { MONGO_QUERY_SHAPES_DIR: shapesDir }),
};
rmSync(resultsFile, { force: true });
rmSync(shapesDir, { recursive: true, force: true });

const mocha = join(root, 'node_modules', 'mocha', 'bin', 'mocha.js');
const reporter = join(root, 'scripts', 'test', 'reporter.cjs');

/** Every unit and integration test file (what TESTS names), relative to the root. */
function testFiles() {
  const out = [];
  const walk = (dir) => {
    if (!existsSync(join(root, dir))) return;
    for (const entry of readdirSync(join(root, dir), { withFileTypes: true })) {
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory()) {
        if (entry.name !== 'node_modules' && entry.name !== 'faults') walk(path);
      } else if (entry.name.endsWith('.test.ts')) out.push(path);
    }
  };
  for (const dir of ['shared/src', 'api/src', 'delivery/src', 'scripts/test', 'shared/test', 'api/test', 'delivery/test', 'clients/typescript/test']) walk(dir);
  return out;
}

/** Every fault test file (what FAULTS names), relative to the root. */
function faultFiles() {
  return readdirSync(join(root, 'api/test/faults')).filter((f) => f.endsWith('.fault.ts')).map((f) => `api/test/faults/${f}`);
}

/** The private Kafka + FerretDB instance the fault tests use by default (api/test/faults/support/infra.ts names it the same way). */
function faultsInstance() {
  return process.env.FAULTS_INFRA_INSTANCE ?? `faults-${createHash('sha256').update(root).digest('hex').slice(0, 8)}`;
}

/** One mocha process over `files` (minus `ignore`); its counts land in `results`. With `output`, its output is kept there instead of shown. */
function runMocha(files, results, runId, output, ignore = [], laneEnv = {}) {
  const args = [mocha, '--reporter', reporter, ...files, ...ignore.flatMap((f) => ['--ignore', f]), ...extra];
  const stdio = output ? ['ignore', 'pipe', 'pipe'] : 'inherit';
  const child = spawn(process.execPath, args, { cwd: root, env: { ...env, ...laneEnv, TEST_RESULTS_FILE: results, TEST_RUN_ID: runId }, stdio });
  if (output) {
    child.stdout.on('data', (chunk) => output.push(chunk));
    child.stderr.on('data', (chunk) => output.push(chunk));
  }
  return new Promise((resolve) => child.on('exit', (c, signal) => resolve(c ?? (signal ? 1 : 0))));
}

function readResults(file) {
  if (!existsSync(file)) return null;
  const r = JSON.parse(readFileSync(file, 'utf8'));
  rmSync(file, { force: true });
  return r;
}

// The whole suite runs in lanes, mocha processes side by side (TEST_LANES, default 4). The fault
// tests (real processes killed and frozen, on a private Kafka + FerretDB, so they share nothing
// with the rest) open the first two lanes, each lane on a private pair of its own (FAULT_LANES,
// default 2: the fault tests in one lane were the run's longest path). The unit and integration
// files are spread over every lane, longest first to the lane that would end first, by the
// files' times in scripts/test/timings.json (a recorded run: refresh it from
// test-artifacts/timings.json when the suite changes shape; a file it does not know counts
// DEFAULT_FILE_MS). Each lane has a run id of its own (so its own topic and databases). The
// second lane's output is shown as it runs, the others' when they end. Most of the suite waits
// (on fences, retries, group joins, receivers), so four lanes on 2 cores end sooner than two.
// `--quick` leaves the fault tests out. TEST_SERIAL=1 runs everything in one process, as files
// named on the command line (`npm test -- api/test/x.test.ts`, which replace the default set) and
// the other modes always do. AFTER_FAULTS run in the first lane, after its fault tests: the
// deploy test waits there for a Compose build that npm test may have started in the background.
const AFTER_FAULTS = ['api/test/deploy.test.ts'];
const DEFAULT_FILE_MS = 15_000;
const lanesWanted = Math.max(1, Number(process.env.TEST_LANES ?? 4) || 4);
const split = named.length === 0 && specs === DEFAULT_SPECS && !mode.has('--unit') && process.env.TEST_SERIAL !== '1' && (mode.has('--quick') || specs.includes(FAULTS[0]));
let code;
const parts = [];
if (split) {
  const withFaults = !mode.has('--quick');
  const baseline = existsSync(join(root, 'scripts/test/timings.json')) ? JSON.parse(readFileSync(join(root, 'scripts/test/timings.json'), 'utf8')) : {};
  const weight = (f) => baseline[f] ?? DEFAULT_FILE_MS;
  // --faults and --full run the fault tests alone (the tools the other files need are not made ready for them).
  const files = withIntegration ? testFiles() : [];
  const lanes = Array.from({ length: lanesWanted }, () => ({ faults: [], files: [], load: 0 }));
  const leastLoaded = (candidates) => candidates.reduce((min, l) => (l.load < min.load ? l : min), candidates[0]);
  if (withFaults) {
    const faultLanes = lanes.slice(0, Math.max(1, Math.min(lanes.length, Number(process.env.FAULT_LANES ?? 2) || 2)));
    for (const f of faultFiles().sort((a, b) => weight(b) - weight(a))) {
      const lane = leastLoaded(faultLanes);
      lane.faults.push(f);
      lane.load += weight(f);
    }
  }
  for (const f of AFTER_FAULTS.filter((f) => files.includes(f))) {
    lanes[0].files.push(f);
    lanes[0].load += weight(f);
  }
  for (const f of files.filter((f) => !AFTER_FAULTS.includes(f)).sort((a, b) => weight(b) - weight(a))) {
    const lane = leastLoaded(lanes);
    lane.files.push(f);
    lane.load += weight(f);
  }
  console.log(`[test] ${lanes.length} lanes, by scripts/test/timings.json: ${lanes.map((l, i) => `lane ${i + 1} ${l.faults.length > 0 ? `${l.faults.length} fault + ` : ''}${l.files.length} files ~${Math.round(l.load / 1000)} s`).join(', ')}`);
  const started = Date.now();
  const elapsed = () => Math.round((Date.now() - started) / 1000);
  const runs = [];
  const faultsDone = [];
  lanes.forEach((lane, i) => {
    if (lane.faults.length === 0) return faultsDone.push(Promise.resolve());
    const out = [];
    const file = `${resultsFile}.faults${i}`;
    // Each fault lane on a private Kafka + FerretDB of its own (the first keeps the default instance name).
    const laneEnv = i === 0 ? {} : { FAULTS_INFRA_INSTANCE: `${faultsInstance()}-${i + 1}` };
    const title = `the fault tests of lane ${i + 1} (${lane.faults.length} files)`;
    const done = runMocha([...lane.faults].sort(), file, `${env.TEST_RUN_ID}f${i}`, out, [], laneEnv).then((c) => (console.log(`\n[test] ${title} ended after ${elapsed()} s`), c));
    runs.push({ title, out, file, done });
    faultsDone.push(done);
  });
  lanes.forEach((lane, i) => {
    if (lane.files.length === 0) return;
    const shown = i === Math.min(1, lanes.length - 1);
    const out = shown ? null : [];
    const file = shown ? resultsFile : `${resultsFile}.${i}`;
    const runId = shown ? env.TEST_RUN_ID : `${env.TEST_RUN_ID}${'lbcdeghijk'[i]}`;
    const sorted = [...lane.files].sort();
    const title = `lane ${i + 1} (${sorted.length} files${lane.faults.length > 0 ? ', after its fault tests' : ''})`;
    runs.push({ title, out, file, done: faultsDone[i].then(() => runMocha(sorted, file, runId, out)).then((c) => (console.log(`\n[test] ${title} ended after ${elapsed()} s`), c)) });
  });
  const codes = await Promise.all(runs.map((r) => r.done));
  for (const r of runs) {
    if (r.out) {
      console.log(`\n[test] output of ${r.title}, run alongside the tests above:`);
      process.stdout.write(Buffer.concat(r.out));
    }
    parts.push(readResults(r.file));
  }
  code = codes.find((c) => c !== 0) ?? 0;
} else {
  code = await runMocha(specs, resultsFile, env.TEST_RUN_ID, null);
  parts.push(readResults(resultsFile));
}

// One summary of every part, written where .ci/run reads it. A skipped test is not a
// pass: it counts as failed here and in .ci/run.
const total = { passes: 0, failures: 0, pending: 0, tests: 0, duration: 0 };
const failed = [];
const timings = {};
for (const r of parts) {
  if (!r) {
    total.failures += 1; // a mocha process that ended without results (it crashed)
    failed.push({ title: 'a mocha process ended without results (it crashed: see its output above)' });
    continue;
  }
  for (const k of Object.keys(total)) total[k] += r[k];
  failed.push(...(r.failed ?? []));
  Object.assign(timings, r.timings ?? {});
}
// The query-shape check: one test that passes when every shape any process recorded is served by a
// declared index (or allowed, with a reason), and fails listing the others and where they were sent from.
const shapes = checkQueryShapes();
if (shapes) {
  total.tests += 1;
  if (shapes.failure) {
    total.failures += 1;
    failed.push(shapes.failure);
  } else total.passes += 1;
}

/** Merges the per-process shape files; null when none was written (no MongoDB client in the run). */
function checkQueryShapes() {
  if (!existsSync(shapesDir)) return null;
  const byShape = new Map();
  for (const file of readdirSync(shapesDir).filter((f) => f.endsWith('.jsonl'))) {
    for (const line of readFileSync(join(shapesDir, file), 'utf8').split('\n')) {
      if (!line.trim()) continue;
      let r;
      try {
        r = JSON.parse(line);
      } catch {
        continue; // a line cut short by a killed process
      }
      const seen = byShape.get(r.shape) ?? { shape: r.shape, index: r.index, allowed: r.allowed, commands: new Set(), from: new Set() };
      seen.commands.add(r.command);
      if (seen.from.size < 3 && r.from.length > 0) seen.from.add(r.from.join(' <- '));
      byShape.set(r.shape, seen);
    }
  }
  if (byShape.size === 0) return null;
  const all = [...byShape.values()].sort((a, b) => a.shape.localeCompare(b.shape));
  const report = all.map((s) => ({ shape: s.shape, commands: [...s.commands], index: s.index, allowed: s.allowed, from: [...s.from] }));
  writeFileSync(join(root, 'test-artifacts', 'query-shapes.json'), JSON.stringify(report, null, 1) + '\n');
  const unserved = report.filter((s) => s.index === null && s.allowed === null);
  console.log(`\n[test] query shapes: ${report.length} sent, ${report.filter((s) => s.allowed).length} allowed without an index, ${unserved.length} with no index (all in test-artifacts/query-shapes.json)`);
  if (unserved.length === 0) return {};
  const message = unserved.map((s) => `${s.shape} (${s.commands.join(', ')})${s.from.map((f) => `\n        from ${f}`).join('')}`).join('\n      ');
  return { failure: { title: `query-shape check: ${unserved.length} query shape(s) no declared index serves (shared/src/mongo/index.ts INDEXES, or ALLOWED_SHAPES with a reason)`, message } };
}

// Where the time went: every file's wall time in test-artifacts/timings.json, the slowest shown.
const slowest = Object.entries(timings).sort((a, b) => b[1] - a[1]);
if (slowest.length > 1) {
  mkdirSync(join(root, 'test-artifacts'), { recursive: true });
  writeFileSync(join(root, 'test-artifacts', 'timings.json'), JSON.stringify(Object.fromEntries(slowest), null, 1) + '\n');
  console.log(`\n[test] the slowest files (all in test-artifacts/timings.json):`);
  for (const [file, ms] of slowest.slice(0, 12)) console.log(`  ${(ms / 1000).toFixed(1).padStart(6)} s  ${file}`);
}
writeFileSync(resultsFile, JSON.stringify(total) + '\n');
// CI shows the end of the output: what failed is repeated here, next to the summary.
if (failed.length) {
  console.log(`\n[test] failed (${failed.length}):`);
  for (const f of failed) console.log(`  - ${f.title}${f.file ? ` (${f.file})` : ''}${f.message ? `\n      ${f.message}` : ''}`);
}
if (total.pending) console.log(`${total.pending} test(s) skipped: a skip is not a pass (see the skip messages above)`);
console.log(`tests: ${total.passes} passed, ${total.failures + total.pending} failed`);
process.exit(code === 0 && total.pending === 0 && total.failures === 0 ? 0 : 1);
