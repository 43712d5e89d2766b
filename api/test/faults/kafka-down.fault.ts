/**
 * The Kafka broker fails during steady ingest: first it hangs (SIGSTOP: its
 * connections stay open, nothing is answered), then it is stopped. Promise:
 * the API never answers 202 for an event it could not make durable; it
 * answers 503 with Retry-After, within a bounded time (the produce timeout,
 * not kafkajs's minute of retries); /readyz turns 503; once the broker is back
 * ingest resumes by itself and every acknowledged event is readable by
 * polling exactly once.
 */
import { expect } from 'chai';
import { call } from '../support/api.js';
import type { TestAccount } from '../support/accounts.js';
import { apiUrl, Cluster, newAccount, sleep, until, untilAllPollable } from './support/cluster.js';
import { recordFigures } from './support/figures.js';
import { IngestLoad, type TimedOutcome } from './support/load.js';
import type { ServiceProcess } from './support/processes.js';

/** The API's setting under test (its default). */
const PRODUCE_TIMEOUT_MS = 10_000;
/** Generous: the produce timeout plus scheduling slack on a loaded machine, far below "hangs". */
const MAX_REQUEST_MS = PRODUCE_TIMEOUT_MS + 10_000;

interface Outage {
  /** Requests started after the broker failed and answered before it came back. */
  during: TimedOutcome[];
  readyz: number;
  firstAcceptedAfterMs: number;
}

describe('fault: Kafka broker hung, then stopped, during steady ingest', function () {
  this.timeout(300_000);
  let cluster: Cluster;
  let api: ServiceProcess;
  let base: string;
  let accounts: TestAccount[];
  let load: IngestLoad;
  const outages: Record<'hung' | 'stopped', Outage | null> = { hung: null, stopped: null };

  before(async function () {
    cluster = await Cluster.create();
    api = await cluster.addApi('kafka-down-api', { PRODUCE_TIMEOUT_MS: String(PRODUCE_TIMEOUT_MS) });
    await api.start();
    base = apiUrl(api);
    accounts = await Promise.all([newAccount(api), newAccount(api), newAccount(api)]);
    load = new IngestLoad(() => base, accounts.map((a) => a.userId), { concurrency: 4, batch: 5, pauseMs: 20 });
    load.start();
    await until('steady ingest', () => load.acked.size >= 200, 60_000);
  });

  after(async function () {
    await load?.stop();
    await cluster?.infra.thaw('kafka').catch(() => undefined);
    await cluster?.infra.start(); // whatever happened, leave the broker running for the next test
    await api?.stop();
  });

  /** Breaks the broker, checks the outage's answers, repairs it, and waits for ingest to be accepted again. */
  async function outage(name: string, breakIt: () => Promise<void>, repair: () => Promise<void>): Promise<Outage> {
    await breakIt();
    const broken = Date.now();
    const readyz = await call(base, 'GET', '/readyz');
    expect(readyz.status, 'readyz while the broker is down').to.equal(503);
    expect(readyz.headers.get('retry-after')).to.match(/^\d+$/);
    expect(JSON.stringify(readyz.body.error.details)).to.include('kafka');
    await until(`a 503 while the broker is ${name}`, () => load.outcomes.some((o) => o.status === 503 && o.startedAt >= broken), 60_000);
    await sleep(3000); // more refusals: the outage lasts a while
    const repairing = Date.now();
    await repair();
    const repaired = Date.now();
    console.log(`      broker ${name} for ${Math.round((repaired - broken) / 1000)} s`);
    const accepted = await until('ingest acknowledged again', () => load.outcomes.find((o) => o.status === 202 && o.startedAt >= repaired), 120_000, 100);
    const during = load.outcomes.filter((o) => o.startedAt >= broken && o.endedAt <= repairing);
    expect(during.length, `requests made and answered while the broker was ${name}`).to.be.greaterThan(0);
    expect(during.filter((o) => o.status === 202).length, `202s while the broker was ${name}`).to.equal(0);
    expect(during.filter((o) => o.status !== 503).map((o) => o.status), `answers other than 503 while ${name}`).to.deep.equal([]);
    return { during, readyz: readyz.status, firstAcceptedAfterMs: accepted.endedAt - repaired };
  }

  it('hung broker: ingest answers 503 within the produce timeout, then resumes by itself', async function () {
    outages.hung = await outage(
      'hung',
      () => cluster.infra.freeze('kafka'),
      () => cluster.infra.thaw('kafka'),
    );
    const slowest = Math.max(...outages.hung.during.map((o) => o.ms));
    expect(slowest, 'slowest answer while hung (ms)').to.be.below(MAX_REQUEST_MS);
  });

  it('stopped broker: ingest answers 503, then resumes by itself when it is back', async function () {
    await sleep(2000);
    outages.stopped = await outage(
      'stopped',
      () => cluster.infra.stop('kafka'),
      () => cluster.infra.start(),
    );
  });

  it('answered only 202 or 503 (with Retry-After) throughout, and every 202 is pollable exactly once', async function () {
    await sleep(2000);
    await load.stop();
    const statuses = new Map<number, number>();
    for (const o of load.outcomes) statuses.set(o.status, (statuses.get(o.status) ?? 0) + 1);
    expect(load.outcomes.filter((o) => o.status !== 202 && o.status !== 503).map((o) => `${o.status} ${JSON.stringify(o.body).slice(0, 200)}`), 'answers other than 202/503').to.deep.equal([]);
    const refusals = load.outcomes.filter((o) => o.status === 503);
    expect(refusals.filter((o) => !/^\d+$/.test(o.retryAfter ?? '')).length, '503s without Retry-After').to.equal(0);
    expect(refusals.every((o) => (o.body as any)?.error?.code === 'unavailable'), '503 bodies are JSON errors').to.equal(true);
    const slowest = Math.max(...load.outcomes.map((o) => o.ms));
    expect(slowest, 'slowest ingest answer (ms)').to.be.below(MAX_REQUEST_MS);
    expect(await until('readyz 200 again', async () => (await api.ready()) || undefined, 60_000)).to.equal(true);

    const result = await untilAllPollable(base, accounts, load.acked.keys(), 90_000);
    recordFigures('kafka-broker-hung-then-stopped', {
      requests: load.outcomes.length,
      answered_202: statuses.get(202) ?? 0,
      answered_503: statuses.get(503) ?? 0,
      requests_while_hung: outages.hung?.during.length ?? null,
      requests_while_stopped: outages.stopped?.during.length ?? null,
      answered_202_while_down: 0,
      slowest_answer_while_hung_ms: outages.hung ? Math.max(...outages.hung.during.map((o) => o.ms)) : null,
      slowest_answer_ms: slowest,
      first_202_after_thaw_ms: outages.hung?.firstAcceptedAfterMs ?? null,
      first_202_after_restart_ms: outages.stopped?.firstAcceptedAfterMs ?? null,
      events_acknowledged: result.expected,
      events_found_by_polling: result.found,
      missing: result.missing.length,
      duplicated: result.duplicated.length,
      written_but_refused: result.unacknowledged,
    });
    expect(result.duplicated, 'events polled more than once').to.deep.equal([]);
    expect(cluster.crashes(), 'processes that exited').to.deep.equal([]);
  });
});
