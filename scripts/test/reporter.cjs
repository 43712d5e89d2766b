// Mocha's spec output, plus the run's counts (and the titles of what failed) written to
// a file so .ci/run can print one plain summary line taken from mocha's own results.
const fs = require('node:fs');
const Mocha = require('mocha');

class SpecWithSummary extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    const failed = [];
    runner.on('fail', (test, err) => {
      const message = String((err && err.message) || err).split('\n')[0].slice(0, 300);
      failed.push({ title: test.fullTitle(), file: test.file ? require('node:path').relative(process.cwd(), test.file) : undefined, message });
    });
    runner.once('end', () => {
      const file = process.env.TEST_RESULTS_FILE || '.test-results.json';
      const { passes, failures, pending, tests, duration } = this.stats;
      fs.writeFileSync(file, JSON.stringify({ passes, failures, pending, tests, duration, failed }) + '\n');
    });
  }
}

module.exports = SpecWithSummary;
