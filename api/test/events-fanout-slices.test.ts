import { expect } from 'chai';
import { atFileEnd } from '#test-support/cleanup.js';
import { baseTestEnv } from '#test-support/env.js';
import { createDeps } from '../src/deps.js';
import { Waiter } from '../src/live/waiters.js';
import { startApi, type RunningApi } from '../src/server.js';
import { createAccount } from './support/accounts.js';
import { testApiConfig } from './support/api.js';
import { eventually, ingest } from './support/events.js';

/**
 * A batch that wakes many readers is dispatched in slices (api/src/live/fanout.ts,
 * WAKE_SLICE): the event loop runs between slices, so one event per account
 * reaching thousands of held readers does not hold every other request for
 * the whole batch. Here a slice is 2 readers and 3 wait on one account, so the
 * loop must turn between every two events of one Kafka batch; every reader
 * still gets every event once, in order.
 *
 * Its own topic (one partition: one ingest request is one batch) and database.
 */
describe('fan-out: a batch that wakes many readers lets the event loop run between slices', function () {
  this.timeout(60_000);
  const base = baseTestEnv();
  let api: RunningApi;

  before(async () => {
    const config = testApiConfig({ EVENTS_TOPIC: `${base.EVENTS_TOPIC}-slices`, MONGO_DB: `${base.MONGO_DB}_slices`, EVENTS_PARTITIONS: '1' });
    const deps = createDeps(config, { events: { fanout: { wakeSlice: 2 } } });
    api = await startApi(config, { deps });
    atFileEnd(() => api.close());
  });

  it('wakes the readers of one batch over several turns of the loop, each reader getting every event in order', async () => {
    const account = await createAccount(api.url);
    // A turn counter the loop advances whenever it gets to run its check phase.
    let turn = 0;
    let spinning = true;
    const spin = (): void => {
      turn += 1;
      if (spinning) setImmediate(spin);
    };
    spin();
    const readers = [0, 1, 2].map(() => {
      const waiter = new Waiter(account.userId, null, -1n, { events: 100, bytes: 1 << 20 });
      const turns: number[] = [];
      waiter.listen({ ready: () => turns.push(turn) });
      api.deps.events.registry.add(waiter);
      return { waiter, turns, ids: [] as string[] };
    });
    try {
      const sent = await ingest(api, Array.from({ length: 6 }, (_, n) => ({ account_id: account.userId, type: 'message.sent', data: { n } })));
      await eventually(() => {
        for (const r of readers) for (let e = r.waiter.take(); e; e = r.waiter.take()) r.ids.push(e.record.id);
        return Promise.resolve(readers.every((r) => r.ids.length >= 6) ? true : undefined);
      });
      for (const r of readers) expect(r.ids).to.deep.equal(sent.map((e) => e.id));
      // Without slices the whole batch is offered in one turn: one distinct value.
      const turnsOfFirst = new Set(readers[0]!.turns);
      expect(turnsOfFirst.size, JSON.stringify(readers[0]!.turns)).to.be.at.least(3);
    } finally {
      spinning = false;
      for (const r of readers) api.deps.events.registry.remove(r.waiter);
    }
  });
});
