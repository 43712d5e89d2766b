import { expect } from 'chai';
import { runPeriodically } from './periodic.js';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe('runPeriodically', () => {
  it('runs the task again and again until stopped, and never after', async () => {
    let runs = 0;
    const stop = runPeriodically(5, () => runs++);
    while (runs < 3) await sleep(5);
    stop();
    const atStop = runs;
    await sleep(40);
    expect(runs).to.equal(atStop);
  });

  it('does not run the task before one interval has passed, jitter or not', async () => {
    let runs = 0;
    const stops = [runPeriodically(10_000, () => runs++), runPeriodically(10_000, () => runs++, 0.2)];
    await sleep(20);
    for (const stop of stops) stop();
    expect(runs).to.equal(0);
  });
});
