// Mocha's spec output, plus the run's counts written to a file so .ci/run can
// print one plain summary line taken from mocha's own results.
const fs = require('node:fs');
const Mocha = require('mocha');

class SpecWithSummary extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    runner.once('end', () => {
      const file = process.env.TEST_RESULTS_FILE || '.test-results.json';
      const { passes, failures, pending, tests, duration } = this.stats;
      fs.writeFileSync(file, JSON.stringify({ passes, failures, pending, tests, duration }) + '\n');
    });
  }
}

module.exports = SpecWithSummary;
