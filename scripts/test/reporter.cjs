// Mocha's spec output, plus the run's counts (and the titles of what failed) written to
// a file so .ci/run can print one plain summary line taken from mocha's own results.
// Each file's wall time (its tests and hooks) goes into the same file, so the run can say
// where its time went.
const fs = require('node:fs');
const path = require('node:path');
const Mocha = require('mocha');

class SpecWithSummary extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    const failed = [];
    const files = new Map(); // file -> ms, from its first test or hook to its last
    let current = null;
    const mark = (runnable) => {
      const file = runnable && runnable.file ? path.relative(process.cwd(), runnable.file) : null;
      if (!file) return;
      const now = Date.now();
      if (current && current.file !== file) {
        files.set(current.file, (files.get(current.file) ?? 0) + (now - current.since));
        current = null;
      }
      if (!current) current = { file, since: now };
    };
    runner.on('hook', mark);
    runner.on('test', mark);
    runner.on('fail', (test, err) => {
      const message = String((err && err.message) || err).split('\n')[0].slice(0, 300);
      failed.push({ title: test.fullTitle(), file: test.file ? path.relative(process.cwd(), test.file) : undefined, message });
    });
    runner.once('end', () => {
      if (current) files.set(current.file, (files.get(current.file) ?? 0) + (Date.now() - current.since));
      const file = process.env.TEST_RESULTS_FILE || '.test-results.json';
      const { passes, failures, pending, tests, duration } = this.stats;
      const timings = Object.fromEntries([...files].sort((a, b) => b[1] - a[1]));
      fs.writeFileSync(file, JSON.stringify({ passes, failures, pending, tests, duration, failed, timings }) + '\n');
    });
  }
}

module.exports = SpecWithSummary;
