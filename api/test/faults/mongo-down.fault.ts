/**
 * The MongoDB server stops while events are ingested and polled. Promise:
 * polling answers 503 (with Retry-After) rather than a wrong page; ingest
 * keeps acknowledging, because Kafka is the log; once MongoDB is back the
 * materializer catches up and every acknowledged event is pollable, exactly
 * once; no process exits.
 */
import { expect } from 'chai';
import { call, type JsonResponse } from '../support/api.js';
import type { TestAccount } from '../support/accounts.js';
import { apiUrl, Cluster, newAccount, sleep, until, untilAllPollable } from './support/cluster.js';
import { recordFigures } from './support/figures.js';
import { IngestLoad } from './support/load.js';
import type { ServiceProcess } from './support/processes.js';

interface PollOutcome {
  status: number;
  retryAfter: string | null;
  code: string | null;
  startedAt: number;
  endedAt: number;
}

/** Each account polls its own events in a loop, following its cursor. */
class Pollers {
  readonly outcomes: PollOutcome[] = [];
  private running = true;
  private readonly loops: Promise<void>[];

  constructor(base: string, accounts: TestAccount[]) {
    this.loops = accounts.map((a) => this.loop(base, a));
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
  }

  private async loop(base: string, account: TestAccount): Promise<void> {
    let since: string | null = null;
    while (this.running) {
      const startedAt = Date.now();
      let outcome: PollOutcome;
      try {
        const res: JsonResponse = await call(base, 'GET', `/api/v1/events?limit=200${since ? `&since=${encodeURIComponent(since)}` : ''}`, { headers: { authorization: `Bearer ${account.apiKey}` } });
        outcome = { status: res.status, retryAfter: res.headers.get('retry-after'), code: res.body?.error?.code ?? null, startedAt, endedAt: Date.now() };
        if (res.status === 200) since = res.body.cursor ?? since;
      } catch {
        outcome = { status: 0, retryAfter: null, code: null, startedAt, endedAt: Date.now() };
      }
      this.outcomes.push(outcome);
      await sleep(outcome.status === 200 ? 100 : 250);
    }
  }
}

/** The API's default KEY_CACHE_LEASE_MS: how long a process answers a confirmed key without reaching MongoDB. */
const KEY_CACHE_LEASE_MS = 2000;

describe('fault: MongoDB stopped during ingest and polling', function () {
  this.timeout(300_000);
  let cluster: Cluster;
  let api: ServiceProcess;
  let accounts: TestAccount[];

  before(async function () {
    cluster = await Cluster.create();
    api = await cluster.addApi('mongo-down-api');
    await api.start();
    accounts = await Promise.all([newAccount(api), newAccount(api), newAccount(api)]);
  });

  after(async function () {
    await cluster?.infra.start();
    await api?.stop();
  });

  it('polling answers 503 (once the key cache lease lapsed), ingest keeps acknowledging, and the materializer catches up afterwards', async function () {
    const base = apiUrl(api);
    const load = new IngestLoad(() => base, accounts.map((a) => a.userId), { concurrency: 2, batch: 5, pauseMs: 50 });
    load.start();
    const pollers = new Pollers(base, accounts);
    try {
      await until('steady ingest', () => load.acked.size >= 200, 60_000);
      const ackedBefore = load.acked.size;

      const stopping = Date.now();
      await cluster.infra.stop('ferretdb');
      const stopped = Date.now();
      console.log(`      MongoDB server stopped (took ${stopped - stopping} ms)`);

      const readyz = await call(base, 'GET', '/readyz');
      expect(readyz.status, 'readyz while MongoDB is down').to.equal(503);
      expect(JSON.stringify(readyz.body.error.details)).to.include('mongo');

      await until('polls refused while MongoDB is down', () => pollers.outcomes.filter((o) => o.startedAt >= stopped && o.status === 503).length >= 3, 60_000);
      await sleep(5000);
      const ackedWhileDown = load.count(202, stopped, Date.now());

      const starting = Date.now();
      await cluster.infra.start();
      const started = Date.now();
      console.log(`      MongoDB server started again (took ${started - starting} ms)`);

      await until('a poll answered again', () => pollers.outcomes.some((o) => o.status === 200 && o.startedAt >= started), 60_000);
      await sleep(2000);
      await load.stop();
      await pollers.stop();

      // Ingest: acknowledged throughout, Kafka being the log.
      expect(load.outcomes.filter((o) => o.status !== 202).map((o) => `${o.status} ${JSON.stringify(o.body).slice(0, 200)}`), 'ingest answers other than 202').to.deep.equal([]);
      expect(ackedWhileDown, 'requests acknowledged while MongoDB was down').to.be.greaterThan(0);

      // Polling: 503 with Retry-After while down, never another error, never a 401 for a good key.
      const whileDown = pollers.outcomes.filter((o) => o.startedAt >= stopped && o.endedAt <= starting);
      expect(whileDown.length, 'polls made and answered while MongoDB was down').to.be.greaterThan(0);
      // In the first moments a poll may still be answered from memory: its key confirmed within the key
      // cache's lease (KEY_CACHE_LEASE_MS, 2 s after the process's last sync) and its cursor in the tail
      // window. Once the lease has lapsed, every poll while down is a 503.
      expect(whileDown.filter((o) => o.status === 503).length, 'polls answered 503 while down').to.be.greaterThan(0);
      const afterLease = whileDown.filter((o) => o.startedAt >= stopped + KEY_CACHE_LEASE_MS + 500);
      expect(afterLease.filter((o) => o.status !== 503).map((o) => `${o.status} ${o.code}`), 'polls while down (after the lease) not answered 503').to.deep.equal([]);
      expect(whileDown.filter((o) => o.status !== 503 && o.status !== 200).map((o) => `${o.status} ${o.code}`), 'polls while down answered neither 503 nor 200').to.deep.equal([]);
      expect(whileDown.filter((o) => o.status === 503 && !/^\d+$/.test(o.retryAfter ?? '')).length, '503s without Retry-After').to.equal(0);
      const otherStatuses = pollers.outcomes.filter((o) => o.status !== 200 && o.status !== 503);
      expect(otherStatuses.map((o) => `${o.status} ${o.code}`), 'poll answers other than 200/503').to.deep.equal([]);

      // The materializer catches up: every acknowledged event, exactly once.
      const catchUpStarted = Date.now();
      const result = await untilAllPollable(base, accounts, load.acked.keys(), 120_000);
      expect(await api.ready(), 'readyz after recovery').to.equal(true);
      recordFigures('mongo-stopped', {
        events_acknowledged: result.expected,
        acknowledged_before_outage: ackedBefore,
        ingest_requests_acknowledged_while_down: ackedWhileDown,
        ingest_requests_refused: load.outcomes.filter((o) => o.status !== 202).length,
        polls_while_down: whileDown.length,
        polls_503_while_down: whileDown.filter((o) => o.status === 503).length,
        events_found_by_polling: result.found,
        missing: result.missing.length,
        duplicated: result.duplicated.length,
        catch_up_ms: Date.now() - catchUpStarted,
      });
      expect(result.duplicated, 'events polled more than once').to.deep.equal([]);
      expect(cluster.crashes(), 'processes that exited').to.deep.equal([]);
    } finally {
      await load.stop();
      await pollers.stop();
    }
  });
});
