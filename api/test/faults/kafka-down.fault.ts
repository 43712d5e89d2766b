/**
 * The Kafka broker stops during steady ingest. Promise: the API never answers
 * 202 for an event it could not make durable (it answers 503 with
 * Retry-After, within a bounded time), /readyz turns 503, and once the broker
 * is back ingest resumes by itself and every acknowledged event is readable
 * by polling exactly once.
 */
import { expect } from 'chai';
import { call } from '../support/api.js';
import type { TestAccount } from '../support/accounts.js';
import { apiUrl, Cluster, newAccount, pollAll, sleep, tally, until } from './support/cluster.js';
import { recordFigures } from './support/figures.js';
import { IngestLoad } from './support/load.js';
import type { ServiceProcess } from './support/processes.js';

/** Generous: far above the produce timeout, far below "hangs forever". */
const MAX_REQUEST_MS = 30_000;

describe('fault: Kafka broker stopped during steady ingest', function () {
  this.timeout(300_000);
  let cluster: Cluster;
  let api: ServiceProcess;
  let accounts: TestAccount[];

  before(async function () {
    cluster = await Cluster.create();
    api = await cluster.addApi('kafka-down-api');
    await api.start();
    accounts = await Promise.all([newAccount(api), newAccount(api), newAccount(api)]);
  });

  after(async function () {
    await cluster?.infra.start(); // whatever happened, leave the broker running for the next test
    await api?.stop();
  });

  it('refuses with 503 + Retry-After while down, resumes by itself, and every 202 is pollable exactly once', async function () {
    const base = apiUrl(api);
    const load = new IngestLoad(() => base, accounts.map((a) => a.userId), { concurrency: 4, batch: 5, pauseMs: 20 });
    load.start();
    try {
      await until('steady ingest', () => load.acked.size >= 200, 60_000);

      const stopping = Date.now();
      await cluster.infra.stop('kafka');
      const stopped = Date.now();
      console.log(`      broker stopped (took ${stopped - stopping} ms)`);

      const readyz = await call(base, 'GET', '/readyz');
      expect(readyz.status, 'readyz while the broker is down').to.equal(503);
      expect(readyz.headers.get('retry-after')).to.match(/^\d+$/);
      expect(JSON.stringify(readyz.body.error.details)).to.include('kafka');

      await until('a 503 answered while the broker is down', () => load.outcomes.some((o) => o.status === 503 && o.startedAt >= stopped), 60_000);
      await sleep(5000); // several more refusals: the outage lasts a while

      const starting = Date.now();
      await cluster.infra.start();
      const started = Date.now();
      console.log(`      broker started again (took ${started - starting} ms)`);

      const resumed = await until('ingest acknowledged again', () => load.outcomes.find((o) => o.status === 202 && o.startedAt >= started), 120_000, 100);
      console.log(`      first 202 after restart: ${resumed.endedAt - started} ms after the broker was up`);
      await sleep(3000);
      await load.stop();

      // What the API answered.
      const statuses = new Map<number, number>();
      for (const o of load.outcomes) statuses.set(o.status, (statuses.get(o.status) ?? 0) + 1);
      const others = load.outcomes.filter((o) => o.status !== 202 && o.status !== 503);
      expect(others.map((o) => `${o.status} ${JSON.stringify(o.body).slice(0, 200)}`), 'answers other than 202/503').to.deep.equal([]);
      const refusals = load.outcomes.filter((o) => o.status === 503);
      expect(refusals.length, '503s').to.be.greaterThan(0);
      expect(refusals.filter((o) => !/^\d+$/.test(o.retryAfter ?? '')).length, '503s without Retry-After').to.equal(0);
      expect(refusals.every((o) => o.body && (o.body as any).error?.code === 'unavailable'), '503 bodies are JSON errors').to.equal(true);
      const whileDown = load.outcomes.filter((o) => o.startedAt >= stopped && o.endedAt <= starting);
      expect(whileDown.length, 'requests made and answered while the broker was down').to.be.greaterThan(0);
      expect(whileDown.filter((o) => o.status === 202).length, '202s while no broker was running').to.equal(0);
      const slowest = Math.max(...load.outcomes.map((o) => o.ms));
      expect(slowest, 'slowest ingest answer (ms)').to.be.below(MAX_REQUEST_MS);

      const ready = await until('readyz 200 again', async () => (await api.ready()) || undefined, 60_000);
      expect(ready).to.equal(true);

      // Every acknowledged event, exactly once.
      let result!: ReturnType<typeof tally>;
      await until(
        'every acknowledged event pollable',
        async () => {
          const found = (await Promise.all(accounts.map((a) => pollAll(base, a.apiKey)))).flat().map((e) => e.id);
          result = tally(load.acked.keys(), found);
          return result.missing.length === 0 || undefined;
        },
        90_000,
        1000,
      );
      const figures = {
        requests: load.outcomes.length,
        answered_202: statuses.get(202) ?? 0,
        answered_503: statuses.get(503) ?? 0,
        answered_202_while_down: 0,
        requests_while_down: whileDown.length,
        events_acknowledged: result.expected,
        events_found_by_polling: result.found,
        missing: result.missing.length,
        duplicated: result.duplicated.length,
        written_but_refused: result.unacknowledged,
        slowest_answer_ms: slowest,
        first_202_after_broker_up_ms: resumed.endedAt - started,
      };
      recordFigures('kafka-broker-stopped', figures);
      expect(result.duplicated, 'events polled more than once').to.deep.equal([]);
      expect(cluster.crashes(), 'processes that exited').to.deep.equal([]);
    } finally {
      await load.stop();
    }
  });
});
