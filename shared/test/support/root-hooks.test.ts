import { expect } from 'chai';
import { isRunTopic } from './root-hooks.js';

describe("test run cleanup: which topics are the run's own", () => {
  it("takes the run's topic and those named after it, not the late files' run whose id starts with ours", () => {
    expect(isRunTopic('events-test-ab12', 'events-test-ab12')).to.equal(true);
    expect(isRunTopic('events-test-ab12-tail', 'events-test-ab12')).to.equal(true);
    // npm test runs the late files as run `<id>l` and the fault tests as `<id>f`, beside run `<id>`.
    expect(isRunTopic('events-test-ab12l', 'events-test-ab12')).to.equal(false);
    expect(isRunTopic('events-test-ab12l-health', 'events-test-ab12')).to.equal(false);
    expect(isRunTopic('events-test-ab12f', 'events-test-ab12')).to.equal(false);
  });
});
