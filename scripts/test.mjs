#!/usr/bin/env node
// `npm test`: brings up Kafka and the MongoDB-wire server (or uses KAFKA_BROKERS
// and MONGO_URL when both are set), runs mocha over every test (the unit and
// integration tests, then the fault tests), and ends with one line
// `tests: N passed, M failed` taken from mocha's results.
//   --unit    only the tests of pure logic next to the code (src/**/*.test.ts): no Kafka,
//             no FerretDB, a few seconds (`npm run test:unit`)
//   --quick   everything but the fault tests (the dev loop: `npm run test:unit`, then `npm run test:quick`)
//   --faults  only the fault tests (`npm run test:faults`)
//   --soak    only the soak, 600 s unless SOAK_SECONDS says otherwise (`npm run soak`)
//   --full    the fault tests at the full sizes (FAULTS_FULL=1; `npm run test:faults:full`)
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureTestTools } from './infra/test-tools.mjs';
import { ensureServices } from './infra/services.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const resultsFile = join(root, '.test-results.json');

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
const services = mode.has('--unit') ? {} : await ensureServices();
const withIntegration = specs.includes(TESTS[TESTS.length - 1]);
let tools = {};
try {
  tools = ensureTestTools((files) => (named.length > 0 ? named.some((a) => files.some((f) => a.includes(f))) : withIntegration));
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
};
rmSync(resultsFile, { force: true });

const mocha = join(root, 'node_modules', 'mocha', 'bin', 'mocha.js');
// Files named on the command line (`npm test -- api/test/x.test.ts`) replace the default set.
// Mocha runs the files in this order: the fault tests (real processes killed and
// restarted, a private Kafka + FerretDB) come last.
const args = [mocha, '--reporter', join(root, 'scripts', 'test', 'reporter.cjs'), ...specs, ...extra];
const child = spawn(process.execPath, args, { cwd: root, env, stdio: 'inherit' });
const code = await new Promise((resolve) => child.on('exit', (c, signal) => resolve(c ?? (signal ? 1 : 0))));

// A skipped test is not a pass: it counts as failed here and in .ci/run.
let skipped = 0;
if (existsSync(resultsFile)) {
  const r = JSON.parse(readFileSync(resultsFile, 'utf8'));
  skipped = r.pending;
  if (skipped) console.log(`${skipped} test(s) skipped: a skip is not a pass (see the skip messages above)`);
  console.log(`tests: ${r.passes} passed, ${r.failures + r.pending} failed`);
} else {
  console.log('tests: 0 passed, 1 failed');
}
process.exit(code === 0 && skipped === 0 ? 0 : 1);
