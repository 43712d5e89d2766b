import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { expect } from 'chai';
import { liveStep, tracingLiveSteps, type LiveStep } from './live-trace.js';

describe('live steps (the bench\'s opt-in breakdown)', () => {
  it('is off with no subscriber, and publishes each step with its time to one', () => {
    expect(tracingLiveSteps()).to.equal(false);
    const seen: LiveStep[] = [];
    const onStep = (msg: unknown): void => void seen.push(msg as LiveStep);
    subscribe('event-platform.live.step', onStep);
    try {
      expect(tracingLiveSteps()).to.equal(true);
      const before = performance.timeOrigin + performance.now();
      liveStep({ step: 'fanout.batch', data: { t: 1 }, kafkaTs: 5 });
      expect(seen).to.have.length(1);
      expect(seen[0]).to.include({ step: 'fanout.batch', kafkaTs: 5 });
      expect(seen[0]!.data).to.deep.equal({ t: 1 });
      expect(seen[0]!.at).to.be.at.least(before).and.at.most(performance.timeOrigin + performance.now());
    } finally {
      unsubscribe('event-platform.live.step', onStep);
    }
    expect(tracingLiveSteps()).to.equal(false);
  });
});
