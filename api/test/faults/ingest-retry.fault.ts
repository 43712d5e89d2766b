/**
 * Producers retry with an idempotency key while the broker hangs (SIGSTOP,
 * so appended batches lose their replies) and then is stopped and started,
 * with batches that take two Kafka sends (so a request can fail part-way).
 * Promise: every batch is eventually acknowledged,
 * and every event is stored exactly once under the id its producer was given:
 * no event is lost, none doubled, none stored under an id nobody was given,
 * however many attempts a batch took and however much of a failed attempt
 * Kafka had appended.
 */
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { Kafka, logLevel } from 'kafkajs';
import type { TestAccount } from '../support/accounts.js';
import { apiUrl, Cluster, INGEST_TOKEN, newAccount, sleep, until, untilAllPollable } from './support/cluster.js';
import { recordFigures } from './support/figures.js';
import type { ServiceProcess } from './support/processes.js';

const FULL = process.env.FAULTS_FULL === '1';
/** Events per request: above 1,000 a request takes two sends (the API's send limit). */
const BATCH = FULL ? 1500 : 1100;
const PRODUCERS = FULL ? 3 : 2;
/** Between a producer's batches: FerretDB materializes a few hundred events a second, and polling reads them all back. */
const PAUSE_MS = FULL ? 0 : 1500;
const PRODUCE_TIMEOUT_MS = 3000;

interface Attempt {
  status: number;
  replayed: boolean;
}

interface Batch {
  key: string;
  ids: string[];
  attempts: Attempt[];
}

async function postWithKey(base: string, key: string, events: unknown[]): Promise<{ status: number; ids: string[]; replayed: boolean; retryAfter: number }> {
  try {
    const res = await fetch(`${base}/internal/v1/events`, {
      method: 'POST',
      headers: { authorization: `Bearer ${INGEST_TOKEN}`, 'content-type': 'application/json', 'idempotency-key': key },
      body: JSON.stringify({ events }),
      signal: AbortSignal.timeout(60_000),
    });
    const body = (await res.json().catch(() => null)) as { events?: { id: string }[] } | null;
    return {
      status: res.status,
      ids: res.status === 202 ? (body?.events ?? []).map((e) => e.id) : [],
      replayed: res.headers.get('idempotent-replayed') === 'true',
      retryAfter: Number(res.headers.get('retry-after') ?? '0'),
    };
  } catch {
    return { status: 0, ids: [], replayed: false, retryAfter: 0 };
  }
}

describe('fault: producers retry with idempotency keys while the broker hangs and is stopped', function () {
  this.timeout(600_000);
  let cluster: Cluster;
  let api: ServiceProcess;
  let base: string;
  let accounts: TestAccount[];
  const batches: Batch[] = [];
  let running = true;
  let workers: Promise<void>[] = [];

  async function produce(worker: number): Promise<void> {
    for (let n = 0; running; n++) {
      const key = `w${worker}-${n}-${randomBytes(4).toString('hex')}`;
      const events = Array.from({ length: BATCH }, (_, i) => ({ account_id: accounts[(worker + i) % accounts.length]!.userId, type: 'message.received', data: { worker, n, i } }));
      const batch: Batch = { key, ids: [], attempts: [] };
      batches.push(batch);
      // Until acknowledged: the same key and body every time, as a well-behaved producer retries.
      for (;;) {
        const r = await postWithKey(base, key, events);
        batch.attempts.push({ status: r.status, replayed: r.replayed });
        if (r.status === 202) {
          batch.ids = r.ids;
          break;
        }
        await sleep(r.retryAfter > 0 ? Math.min(r.retryAfter * 1000, 2000) : 300);
      }
      if (PAUSE_MS > 0) await sleep(PAUSE_MS);
    }
  }

  before(async function () {
    cluster = await Cluster.create();
    api = await cluster.addApi('ingest-retry-api', { PRODUCE_TIMEOUT_MS: String(PRODUCE_TIMEOUT_MS), INGEST_MAX_BATCH: String(BATCH) });
    await api.start();
    base = apiUrl(api);
    accounts = await Promise.all([newAccount(api), newAccount(api)]);
    workers = Array.from({ length: PRODUCERS }, (_, w) => produce(w));
    await until('steady ingest', () => batches.filter((b) => b.ids.length > 0).length >= PRODUCERS, 120_000);
  });

  after(async function () {
    running = false;
    await cluster?.infra.thaw('kafka').catch(() => undefined);
    await cluster?.infra.start();
    await Promise.race([Promise.all(workers), sleep(60_000)]);
    await api?.stop();
  });

  it('acknowledges every batch in the end and stores each event once, under the id its producer was given', async function () {
    await cluster.infra.freeze('kafka');
    await sleep(PRODUCE_TIMEOUT_MS + 3000);
    await cluster.infra.thaw('kafka');
    await sleep(4000);
    await cluster.infra.stop('kafka');
    await sleep(5000);
    await cluster.infra.start();
    await sleep(6000);
    running = false;
    await Promise.all(workers);

    const acked = batches.flatMap((b) => b.ids);
    const retried = batches.filter((b) => b.attempts.length > 1);
    const result = await untilAllPollable(base, accounts, acked, 180_000);
    // How much the failed attempts had written: records on the topic beyond one per acknowledged event.
    const kafka = new Kafka({ brokers: cluster.infra.endpoints.KAFKA_BROKERS.split(','), logLevel: logLevel.NOTHING });
    const admin = kafka.admin();
    await admin.connect();
    const offsets = await admin.fetchTopicOffsets(cluster.topic);
    await admin.disconnect();
    const onTopic = offsets.reduce((sum, o) => sum + Number(o.high), 0);
    recordFigures('ingest-retry-with-idempotency-keys', {
      events_per_batch: BATCH,
      batches: batches.length,
      batches_retried: retried.length,
      attempts: batches.reduce((n, b) => n + b.attempts.length, 0),
      attempts_503: batches.reduce((n, b) => n + b.attempts.filter((a) => a.status === 503).length, 0),
      attempts_409: batches.reduce((n, b) => n + b.attempts.filter((a) => a.status === 409).length, 0),
      answered_from_stored_key: batches.filter((b) => b.attempts.at(-1)?.replayed).length,
      events_acknowledged: result.expected,
      events_found_by_polling: result.found,
      missing: result.missing.length,
      duplicated: result.duplicated.length,
      stored_under_unacknowledged_ids: result.unacknowledged,
      records_on_topic: onTopic,
      records_written_twice_absorbed: onTopic - result.expected,
    });
    expect(retried.length, 'batches that needed a retry (the faults did not bite)').to.be.greaterThan(0);
    expect(result.missing, 'acknowledged events not found').to.deep.equal([]);
    expect(result.duplicated, 'events polled more than once').to.deep.equal([]);
    expect(result.unacknowledged, 'events stored under ids no producer was given').to.equal(0);
    expect(cluster.crashes(), 'processes that exited').to.deep.equal([]);
  });
});
