/**
 * Soak: mixed load on two API processes and a delivery process for
 * SOAK_SECONDS (60 inside npm test, 600 with `npm run soak`): ingest,
 * cursor polls, long-polls, SSE streams that end and resume from their last
 * id, and webhook deliveries. The RSS of every process is sampled; growth is
 * reported, and clearly unbounded growth (a steep least-squares slope over
 * the second half of the run, with a real rise) fails the test. Along the
 * way: no 5xx anywhere, every acknowledged event pollable exactly once,
 * every resumed stream gap-free and duplicate-free, every matching event
 * delivered.
 */
import { expect } from 'chai';
import type { TestAccount } from '../support/accounts.js';
import { Receiver, receiverCaFile } from '#test-support/receiver.js';
import { apiUrl, Cluster, createWebhook, newAccount, pollAll, sleep, tally, until } from './support/cluster.js';
import { recordFigures } from './support/figures.js';
import { IngestLoad } from './support/load.js';
import type { ServiceProcess } from './support/processes.js';
import { growth, RssSampler, type Growth } from './support/rss.js';
import { Readers } from './support/readers.js';

const SECONDS = Number(process.env.SOAK_SECONDS ?? 60);
/** Generous: a leak of this size would grow a process by gigabytes a day. */
const MAX_SLOPE_MB_PER_MIN = Number(process.env.SOAK_MAX_SLOPE_MB_PER_MIN ?? (SECONDS >= 300 ? 20 : 60));
/** A slope alone over a short window can be garbage-collector noise: the fitted rise must be real too. */
const MIN_RISE_MB = 48;
const DELIVERED_TYPE = 'call.completed';

describe(`soak: ${SECONDS} s of mixed load, RSS sampled`, function () {
  this.timeout((SECONDS + 300) * 1000);
  let cluster: Cluster;
  let apis: ServiceProcess[];
  let worker: ServiceProcess;
  let receiver: Receiver;
  let accounts: TestAccount[];

  before(async function () {
    receiver = await Receiver.start();
    cluster = await Cluster.create({
      // Short streams, so they end and resume from their last id many times over.
      apiEnv: { STREAM_DURATION_MS: '10000', STREAM_HEARTBEAT_MS: '3000' },
      deliveryEnv: { WEBHOOK_CA_FILE: await receiverCaFile(), WEBHOOK_RETRY_SCHEDULE: '1s,2s,4s,8s', WEBHOOK_POLL_INTERVAL_MS: '1000' },
    });
    apis = [await cluster.addApi('soak-api-a'), await cluster.addApi('soak-api-b')];
    worker = cluster.addDelivery('soak-worker');
    await Promise.all([...apis.map((a) => a.start()), worker.start()]);
    accounts = await Promise.all([newAccount(apis[0]!), newAccount(apis[1]!), newAccount(apis[0]!)]);
    for (const [i, a] of accounts.entries()) await createWebhook(apis[i % 2]!, a.apiKey, receiver.url(`/soak-${i}`), [DELIVERED_TYPE]);
  });

  after(async function () {
    await worker?.stop();
    await Promise.all((apis ?? []).map((a) => a.stop()));
    await receiver?.close();
  });

  let load: IngestLoad;
  let readers: Readers;
  let sampler: RssSampler;
  let bases: string[];
  const figures: Record<string, unknown> = { seconds: SECONDS };

  it(`runs ${SECONDS} s of mixed load with only the expected answers`, async function () {
    bases = apis.map(apiUrl);
    let turn = 0;
    const nextBase = (): string => bases[turn++ % bases.length] as string;
    load = new IngestLoad(nextBase, accounts.map((a) => a.userId), { concurrency: 2, batch: 5, pauseMs: 300 });
    load.start();
    readers = new Readers(nextBase, accounts);
    sampler = new RssSampler([...apis, worker]);
    sampler.start();
    const started = Date.now();
    while (Date.now() - started < SECONDS * 1000) {
      await sleep(Math.min(30_000, SECONDS * 1000 - (Date.now() - started)));
      const rss = [...apis, worker].map((p) => `${p.name} ${Math.round((p.rss() ?? 0) / 1024 / 1024)} MB`).join(', ');
      console.log(`      ${Math.round((Date.now() - started) / 1000)} s: ${load.acked.size} events acknowledged, ${receiver.received().length} delivered; RSS ${rss}`);
    }
    sampler.stop();
    await Promise.all([load.stop(), readers.stop()]);
    for (const o of load.outcomes) readers.ops.record('ingest', o.status);
    figures.requests = readers.ops.summary();
    expect(readers.ops.unexpected({ ingest: [202], stream: [200] }), 'answers other than the expected ones').to.deep.equal([]);
    expect(cluster.crashes(), 'processes that exited unasked').to.deep.equal([]);
  });

  it('read everything exactly once: polling, every resumed stream gap-free, every matching event delivered', async function () {
    let perAccount: { id: string; type: string; cursor: string }[][] = [];
    let result!: ReturnType<typeof tally>;
    await until(
      'every acknowledged event pollable',
      async () => {
        perAccount = await Promise.all(accounts.map((a) => pollAll(bases[0]!, a.apiKey)));
        result = tally(load.acked.keys(), perAccount.flat().map((e) => e.id));
        return result.missing.length === 0 || undefined;
      },
      120_000,
      1000,
    );
    expect(result.duplicated, 'events polled more than once').to.deep.equal([]);
    for (const s of readers.streams) {
      const cursors = perAccount[accounts.indexOf(s.account)]!.map((e) => e.cursor);
      expect(new Set(s.ids).size, 'no event twice on a resumed stream').to.equal(s.ids.length);
      const from = cursors.indexOf(s.ids[0] as string);
      expect(s.ids, "a resumed stream is a gap-free run of the account's events").to.deep.equal(cursors.slice(from, from + s.ids.length));
    }
    const toDeliver = perAccount.flatMap((events, i) => events.filter((e) => e.type === DELIVERED_TYPE).map((e) => `${i}:${e.id}`));
    await until(
      'every matching event delivered',
      () => {
        const got = new Set(receiver.received().map((r) => `${r.path.slice('/soak-'.length)}:${r.body.id}`));
        return toDeliver.every((k) => got.has(k)) || undefined;
      },
      180_000,
      1000,
    );
    Object.assign(figures, {
      events_acknowledged: result.expected,
      events_found_by_polling: result.found,
      duplicated: result.duplicated.length,
      stream_events_received: readers.streams.reduce((n, s) => n + s.ids.length, 0),
      webhook_deliveries_expected: toDeliver.length,
      webhook_requests_received: receiver.received().length,
    });
  });

  it('kept every process\'s RSS bounded', function () {
    const memory: Record<string, Growth> = {};
    for (const [name, samples] of sampler.samples) memory[name] = growth(samples);
    recordFigures(SECONDS >= 300 ? 'soak-long' : 'soak', { ...figures, rss: memory, max_slope_mb_per_min: MAX_SLOPE_MB_PER_MIN });
    for (const [name, g] of Object.entries(memory)) {
      const unbounded = g.second_half_slope_mb_per_min > MAX_SLOPE_MB_PER_MIN && g.second_half_rise_mb > MIN_RISE_MB;
      expect(unbounded, `${name}: RSS ${g.start_mb} -> ${g.end_mb} MB, ${g.second_half_slope_mb_per_min} MB/min over the second half`).to.equal(false);
    }
  });
});
