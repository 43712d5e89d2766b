/**
 * The fan-out consumer of an API process rejoins its group: after the process
 * was frozen (SIGSTOP) past the session timeout, and after a broker restart.
 * Its group commits nothing, so on every join kafkajs would resume each
 * partition at its end. Promise: events written while the fan-out was away
 * reach that process's waiting readers (a stream and a long-poll of a quiet
 * account), and a stream resumed from the cursor before them gets them too,
 * in order, none missing, none twice.
 *
 * The timing that loses events (an event written after the fan-out last
 * fetched a partition and before its rejoin resolved where to resume) is
 * forced rather than hoped for. In the first case another member joins the
 * group, takes the account's partition while the events are written, and
 * leaves. When the process is frozen, or the broker restarts, kafkajs keeps
 * fetching at its in-memory offsets until it notices the rejoin, which mostly
 * catches the events before the position is lost: those two cases are
 * regression tests of the same path (events ingested through another API
 * process while this one is frozen), not reproductions of the loss.
 * Full run (FAULTS_FULL=1): a longer freeze, two rounds of each fault before
 * any other event arrives, and more events per round.
 */
import { expect } from 'chai';
import { Kafka, logLevel } from 'kafkajs';
import { partitionForKey } from '#shared/eventlog/kafka.js';
import { call, type JsonResponse } from '../support/api.js';
import type { TestAccount } from '../support/accounts.js';
import { apiUrl, Cluster, ingestMany, ingestRaw, newAccount, pollAll, pollAllOrRefused, sleep, until, type PollRefusal } from './support/cluster.js';
import { recordFigures } from './support/figures.js';
import type { ServiceProcess } from './support/processes.js';
import { openStream, type OpenStream } from './support/streams.js';

const FULL = process.env.FAULTS_FULL === '1';
/** The fan-out consumer's session timeout is 10 s: frozen longer, it is out of its group. */
const FREEZE_MS = FULL ? 25_000 : 14_000;
const ROUNDS = FULL ? 2 : 1;
const EVENTS_PER_ROUND = FULL ? 50 : 1;
/** Long enough for the freeze and the rejoin; within LONG_POLL_MAX_MS. */
const LONG_POLL_MS = 55_000;
const DELIVERED_WITHIN_MS = 45_000;
/**
 * Polls may answer 503 (with Retry-After) after the fault, while the fan-out
 * and the materializer rejoin their groups (docs/decisions.md, "Which events a
 * poll ... must include"): after a broker restart the broker loads each group
 * with its members from before, whose sessions must lapse first (session
 * timeout 10 s, rebalance timeout 15 s). Polls answer 200 again within this.
 */
const POLLABLE_AGAIN_MS = 60_000;

describe('fault: the fan-out consumer rejoins its group (API frozen past the session timeout; broker restarted)', function () {
  this.timeout(FULL ? 900_000 : 400_000);
  let cluster: Cluster;
  let a: ServiceProcess;
  let b: ServiceProcess;
  const streams: OpenStream[] = [];
  const followers: Follower[] = [];

  before(async function () {
    cluster = await Cluster.create();
    // Streams last as long as a long-poll; A's materializer may be frozen, B's takes over.
    const env = { STREAM_DURATION_MS: '55000', LONG_POLL_MAX_MS: '55000' };
    a = await cluster.addApi('rejoin-api-a', env);
    b = await cluster.addApi('rejoin-api-b', env);
    await Promise.all([a.start(), b.start()]);
  });

  after(async function () {
    for (const s of streams) s.close();
    await Promise.all(followers.map((f) => f.stop()));
    if (a?.pid) process.kill(a.pid, 'SIGCONT');
    await cluster?.infra.start();
    await Promise.all([a?.stop(), b?.stop()]);
  });

  interface Follower {
    ids: string[];
    statuses: number[];
    connections: number;
    stop(): Promise<void>;
  }

  /** A stream on `api` that reconnects from its last id (event or resume point) whenever the server ends it, as EventSource does. */
  async function follow(api: ServiceProcess, account: TestAccount): Promise<Follower> {
    let current = await openStream(apiUrl(api), account.apiKey);
    expect(current.status, 'stream').to.equal(200);
    let running = true;
    const done: string[] = [];
    const statuses = [200];
    let connections = 1;
    const loop = (async () => {
      while (running) {
        await current.ended;
        done.push(...current.ids);
        const from = current.lastId;
        current = { ...current, ids: [] };
        while (running) {
          const next = await openStream(apiUrl(api), account.apiKey, from ? `&since=${encodeURIComponent(from)}` : '');
          statuses.push(next.status);
          if (next.status === 200) {
            current = next;
            connections += 1;
            break;
          }
          await sleep(1000);
        }
      }
    })();
    return {
      get ids() {
        return [...done, ...current.ids];
      },
      statuses,
      get connections() {
        return connections;
      },
      stop: async () => {
        running = false;
        current.close();
        await loop;
      },
    };
  }

  /** Ingests through B until acknowledged (B may be reconnecting to a restarted broker). */
  async function ingestViaB(account: TestAccount, n: number, round: number): Promise<string[]> {
    const events = Array.from({ length: n }, (_, i) => ({ account_id: account.userId, type: 'message.received', data: { round, i } }));
    return until(
      'B acknowledges the events',
      async () => {
        const outcome = await ingestRaw(apiUrl(b), events, 20_000);
        return outcome.status === 202 ? outcome.ids : undefined;
      },
      120_000,
      500,
    );
  }

  /**
   * One fault, with a stream and a long-poll waiting on A for a quiet account
   * and a cursor to resume from. `fault` breaks things and ingests the
   * events (through B) while A's fan-out is away; returns what arrived.
   */
  async function scenario(name: string, fault: (account: TestAccount, round: number) => Promise<string[]>, makeAccount = () => newAccount(a)) {
    const account = await makeAccount();
    const [first] = await ingestMany(a, account.userId, 1);
    const all = await until('the first event pollable', async () => {
      const got = await pollAll(apiUrl(a), account.apiKey);
      return got.length === 1 ? got : undefined;
    }, 30_000);
    expect(all[0]?.id).to.equal(first);
    const resumeFrom = all[0]!.cursor;

    const stream = await follow(a, account);
    followers.push(stream);
    const longPoll: Promise<JsonResponse> = call(apiUrl(a), 'POST', '/api/v1/events/wait', { headers: { authorization: `Bearer ${account.apiKey}` }, body: { timeout_ms: LONG_POLL_MS, since: resumeFrom } });
    await sleep(1000); // both registered

    const written: string[] = [];
    const faultStarted = Date.now();
    for (let round = 0; round < ROUNDS; round++) written.push(...(await fault(account, round)));
    const recovered = Date.now();

    // No further event arrives: what A's readers get now, they get because the fan-out went back for it.
    const waited = await longPoll;
    const longPollMs = Date.now() - recovered;
    // A resume may be refused (503) while the materializer is still catching up after the fault: clients retry.
    let refusals = 0;
    const resumed = await until('a stream resumed on A', async () => {
      const s = await openStream(apiUrl(a), account.apiKey, `&since=${encodeURIComponent(resumeFrom)}`);
      if (s.status === 200) return s;
      expect(s.status, 'resumed stream on A').to.equal(503);
      refusals += 1;
      return undefined;
    }, 60_000, 1000);
    streams.push(resumed);
    // Every event as B polls it, to name the cursors A's streams carry. (A resumed stream no longer implies
    // that the materializer has caught up: a cursor inside A's tail window resumes without waiting for it.)
    // B's polls may be refused (503) while its fan-out and the materializer rejoin after the fault: clients retry.
    const pollRefusals: PollRefusal[] = [];
    const onB = await until('B polls every event written', async () => {
      const got = await pollAllOrRefused(apiUrl(b), account.apiKey, pollRefusals);
      return got && got.length >= 1 + written.length ? got : undefined;
    }, POLLABLE_AGAIN_MS, 500);
    const pollableAfterMs = Date.now() - recovered;
    const cursorOf = new Map(onB.map((e) => [e.cursor, e.id]));
    // The stream opened without a cursor may also get the first event, if A had not dispatched it yet (it was
    // written to a partition A did not own at the time): that is after its start, not a gap or a duplicate.
    const idsOf = (s: { ids: string[] }): string[] => s.ids.map((c) => cursorOf.get(c) ?? c).filter((id) => id !== first);
    await until(`A's stream and the resumed stream carry the ${written.length} events`, () => {
      return (idsOf(stream).length >= written.length && idsOf(resumed).length >= written.length) || undefined;
    }, DELIVERED_WITHIN_MS, 200).catch(() => undefined);
    const streamMs = Date.now() - recovered;
    await sleep(500);
    const figures = {
      rounds: ROUNDS,
      events_written_while_away: written.length,
      fault_ms: recovered - faultStarted,
      long_poll_event: waited.body?.event?.id === written[0],
      long_poll_answered_after_recovery_ms: longPollMs,
      stream_events: idsOf(stream).length,
      stream_connections: stream.connections,
      resumed_stream_events: idsOf(resumed).length,
      resume_refusals_503: refusals,
      poll_refusals_503: pollRefusals.length,
      polls_complete_after_ms: pollableAfterMs,
      streams_complete_after_ms: streamMs,
    };
    recordFigures(`fanout-rejoin-${name}`, figures);
    expect(pollRefusals.filter((r) => !/^[1-9]\d*$/.test(r.retryAfter ?? '')), "B's polls refused with 503 and no Retry-After (seconds)").to.deep.equal([]);
    expect(waited.status, 'long-poll status').to.equal(200);
    expect(waited.body.event?.id, 'the long-poll waiting on A got the first event written while its fan-out was away').to.equal(written[0]);
    expect(stream.statuses.filter((st) => st !== 200), 'stream reconnections refused').to.deep.equal([]);
    expect(idsOf(stream), 'the stream open on A (reconnecting from its last id when it ends): every event, in order, once').to.deep.equal(written);
    expect(idsOf(resumed), 'a stream resumed on A from the cursor before them: every event, in order, once').to.deep.equal(written);
  }

  it('a rebalance hands a quiet account\'s partition to another member and back: A\'s waiting readers get the events written meanwhile', async function () {
    // Another member joins A's fan-out group (as after a coordinator move or a second member's session): it
    // takes some partitions, events are written to one of them, and it leaves; A gets the partition back.
    const kafka = new Kafka({ clientId: 'zzz-intruder', brokers: cluster.infra.endpoints.KAFKA_BROKERS.split(','), logLevel: logLevel.NOTHING });
    const admin = kafka.admin();
    await admin.connect();
    const groups = (await admin.listGroups()).groups.map((g) => g.groupId).filter((g) => g.startsWith(`${cluster.topic}.fanout.rejoin-api-a.`));
    await admin.disconnect();
    expect(groups, "A's fan-out group").to.have.length(1);
    const intruder = kafka.consumer({ groupId: groups[0]!, sessionTimeout: 10_000, heartbeatInterval: 1000, rebalanceTimeout: 15_000, maxWaitTimeInMs: 100 });
    let held: number[] = [];
    intruder.on(intruder.events.GROUP_JOIN, ({ payload }) => (held = payload.memberAssignment[cluster.topic] ?? []));
    let connected = false;
    try {
      await scenario(
        'rebalance',
        async (account, round) => {
          const ids = await ingestViaB(account, EVENTS_PER_ROUND, round);
          await until('the events pollable', async () => ((await pollAll(apiUrl(b), account.apiKey)).length >= 1 + EVENTS_PER_ROUND * (round + 1) || undefined), 30_000);
          if (round === ROUNDS - 1) {
            await intruder.disconnect(); // A takes every partition back
            connected = false;
          }
          return ids;
        },
        async () => {
          await intruder.connect();
          connected = true;
          await intruder.subscribe({ topic: cluster.topic });
          await intruder.run({ autoCommit: false, eachBatch: async () => undefined });
          const partitions = await until('the other member holds partitions', () => (held.length > 0 ? held : undefined), 60_000);
          // An account whose partition the other member holds: A does not fetch it meanwhile.
          for (;;) {
            const account = await newAccount(a);
            if (partitions.includes(partitionForKey(account.userId, 3))) return account;
          }
        },
      );
    } finally {
      if (connected) await intruder.disconnect();
    }
    expect(cluster.crashes(), 'processes that exited unasked').to.deep.equal([]);
  });

  it('an API process frozen past the session timeout: its waiting readers get the events written meanwhile', async function () {
    await scenario('api-frozen', async (account, round) => {
      process.kill(a.pid!, 'SIGSTOP');
      try {
        await sleep(FREEZE_MS / 2);
        const ids = await ingestViaB(account, EVENTS_PER_ROUND, round);
        await sleep(FREEZE_MS / 2);
        return ids;
      } finally {
        process.kill(a.pid!, 'SIGCONT');
        // Let A notice it was evicted and rejoin before the next round freezes it again.
        await until('A ready again', async () => (await a.ready()) || undefined, 60_000);
        await sleep(3000);
      }
    });
    expect(cluster.crashes(), 'processes that exited unasked').to.deep.equal([]);
  });

  it('a broker restart: the waiting readers get the events written before the fan-out rejoined', async function () {
    await scenario('broker-restart', async (account, round) => {
      // A stays frozen across the restart, so the events are surely written before its fan-out is back.
      process.kill(a.pid!, 'SIGSTOP');
      try {
        await cluster.infra.stop('kafka');
        await cluster.infra.start();
        return await ingestViaB(account, EVENTS_PER_ROUND, round);
      } finally {
        process.kill(a.pid!, 'SIGCONT');
        await until('A ready again', async () => (await a.ready()) || undefined, 120_000);
        await sleep(3000);
      }
    });
    expect(cluster.crashes(), 'processes that exited unasked').to.deep.equal([]);
  });
});
