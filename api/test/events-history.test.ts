import { expect } from 'chai';
import { encodeCursor, type Position } from '#shared/cursor.js';
import { buildEnvelope, docToRecord, toEventDoc } from '#shared/eventlog/envelope.js';
import { EventLog } from '#shared/eventlog/event-log.js';
import { createKafka, partitionForKey, topicCatalog } from '#shared/eventlog/kafka.js';
import type { EventType } from '#shared/eventlog/types.js';
import { createLogger } from '#shared/log.js';
import { createMongo, type Mongo } from '#shared/mongo/index.js';
import { baseTestEnv } from '#test-support/env.js';
import { Materializer, type MaterializerOptions } from '../src/event-store/materializer.js';
import { PageCache } from '../src/event-store/page-cache.js';
import { readAfter, readEventAt, readPartition } from '../src/event-store/store.js';
import type { StoredEvent } from '../src/event-store/types.js';
import { testApiConfig } from './support/api.js';
import { eventually, fakeAccountId, sleep } from './support/events.js';

/** History read from the account streams (event-store/pages.ts), written by the real materializer into FerretDB. */
describe('history pages: the materializer\'s account streams on the real store', function () {
  this.timeout(120_000);
  const env = baseTestEnv();
  const config = testApiConfig({ EVENTS_TOPIC: `${env.EVENTS_TOPIC}-history`, MONGO_DB: `${env.MONGO_DB}_history` });
  const topic = config.kafka.eventsTopic;
  const log = createLogger('test', 'silent');
  const kafka = createKafka(config, log);
  let mongo: Mongo;
  let eventLog: EventLog;
  const running: Materializer[] = [];

  const materializer = (more: Partial<MaterializerOptions> = {}): Materializer => {
    const m = new Materializer({
      kafka,
      events: mongo.collections.events,
      watermarks: mongo.collections.watermarks,
      pages: mongo.collections.eventPages,
      topic,
      groupId: config.events.materializerGroupId,
      log,
      chunkSize: 13,
      pageEvents: 5,
      ...more,
    });
    running.push(m);
    return m;
  };

  before(async () => {
    mongo = createMongo(config);
    eventLog = new EventLog(kafka, topicCatalog(config).events, log);
    await eventLog.start();
  });

  afterEach(async () => {
    for (const m of running.splice(0)) await m.stop().catch(() => undefined);
  });

  after(async () => {
    await eventLog.stop();
    await mongo.close();
  });

  /** An account's whole stream (or one type's), paged by `limit` from the oldest, as offsets. */
  async function pageThrough(accountId: string, partition: number, limit: number, types: EventType[] | null = null, cache?: PageCache, from: number | null = null): Promise<number[]> {
    const through = BigInt(Number.MAX_SAFE_INTEGER);
    const seen: number[] = [];
    let since: Position | null = from === null ? null : { partition, offset: BigInt(from) };
    for (;;) {
      const page = await readAfter(mongo.collections.eventPages, { accountId, partition, since, through, types, limit }, cache);
      if (page.length === 0) return seen;
      seen.push(...page.map((d) => d.offset));
      since = { partition, offset: BigInt(page.at(-1)!.offset) };
    }
  }

  /** Waits until the materializer has stored every published position. */
  async function materialized(positions: Position[]): Promise<void> {
    const ends = new Map<number, number>();
    for (const p of positions) ends.set(p.partition, Math.max(ends.get(p.partition) ?? -1, Number(p.offset)));
    await eventually(async () => {
      const marks = new Map((await mongo.collections.watermarks.find({ topic }).toArray()).map((w) => [w.partition, w.offset]));
      return [...ends].every(([p, end]) => (marks.get(p) ?? -1) >= end) ? true : undefined;
    }, 60_000, 50);
  }

  it('reads through the process\'s page cache: the newest page as it grows and right after it fills, full pages from memory, the same answers as the store', async () => {
    const accountId = fakeAccountId();
    const cache = new PageCache(1 << 20);
    const m = materializer();
    await m.start();
    const sent: Position[] = [];
    const publish = async (n: number): Promise<void> => {
      const batch = Array.from({ length: n }, (_, i) => buildEnvelope({ account_id: accountId, type: 'message.received', data: { i: sent.length + i } }, new Date()));
      sent.push(...(await eventLog.publish(batch)));
      await materialized(sent);
    };
    const all = (): number[] => sent.map((p) => Number(p.offset));
    const partition = (): number => sent[0]!.partition;
    // Pages of 5: 12 events are two full pages and a newest one of 2.
    await publish(12);
    expect(await pageThrough(accountId, partition(), 3, null, cache)).to.deep.equal(all());
    // The newest page fills (5) and the next begins: read from a cursor inside the page that was the newest.
    await publish(4);
    expect(await pageThrough(accountId, partition(), 100, null, cache, all()[10]!)).to.deep.equal(all().slice(11));
    expect(await pageThrough(accountId, partition(), 4, null, cache)).to.deep.equal(all());
    const hits = cache.stats.hits;
    expect(hits, 'full pages were read from the cache').to.be.greaterThan(0);
    expect(await pageThrough(accountId, partition(), 2, null, cache)).to.deep.equal(await pageThrough(accountId, partition(), 2));
    expect(cache.stats.hits).to.be.greaterThan(hits);
  });

  for (const stage of ['pages', 'between pages and heads'] as const) {
    it(`holds each event once, in order, in every account stream after a crash (${stage}) and a successor writing the same batches again; pages crossed with cursors mid-page`, async () => {
      const accounts = Array.from({ length: 4 }, () => fakeAccountId());
      const published: { accountId: string; type: EventType; position: Position }[] = [];
      const producing = (async () => {
        for (let round = 0; round < 20; round++) {
          const batch = Array.from({ length: 8 }, (_, i) => ({ account_id: accounts[(round + i) % accounts.length]!, type: (i === 3 && round % 5 === 0 ? 'call.takeover' : 'message.received') as EventType, data: { round, i } }));
          const positions = await eventLog.publish(batch.map((e) => buildEnvelope(e, new Date())));
          batch.forEach((e, i) => published.push({ accountId: e.account_id, type: e.type, position: positions[i]! }));
          await sleep(20);
        }
      })();
      let written = 0;
      let crashed = false;
      const crashOnce = (): 'crash' | void => {
        written += 1;
        if (written < 4 || crashed) return;
        crashed = true;
        return 'crash';
      };
      const first = materializer(stage === 'pages' ? { afterWrite: (at) => (at === 'pages' ? crashOnce() : undefined) } : { afterPages: crashOnce });
      await first.start();
      await eventually(async () => (crashed ? true : undefined), 30_000);
      await first.stop();
      await producing;
      const second = materializer();
      await second.start();
      const ends = new Map<number, number>();
      for (const p of published) ends.set(p.position.partition, Math.max(ends.get(p.position.partition) ?? -1, Number(p.position.offset)));
      await eventually(async () => {
        const marks = new Map((await mongo.collections.watermarks.find({ topic }).toArray()).map((w) => [w.partition, w.offset]));
        return [...ends].every(([p, end]) => (marks.get(p) ?? -1) >= end) ? true : undefined;
      }, 60_000, 50);

      for (const accountId of accounts) {
        const mine = published.filter((p) => p.accountId === accountId);
        const partition = mine[0]!.position.partition;
        const expected = mine.map((p) => Number(p.position.offset)).sort((a, b) => a - b);
        expect(expected.length).to.equal(40);
        // Pages hold 5 events; pages of 3 and 7 put cursors in the middle of pages and cross their ends.
        expect(await pageThrough(accountId, partition, 3), accountId).to.deep.equal(expected);
        expect(await pageThrough(accountId, partition, 7), accountId).to.deep.equal(expected);
        const rare = mine.filter((p) => p.type === 'call.takeover').map((p) => Number(p.position.offset)).sort((a, b) => a - b);
        expect(await pageThrough(accountId, partition, 2, ['call.takeover'])).to.deep.equal(rare);
      }
    });
  }
  it('writes each event\'s body once, into its stream: the events collection holds ids and positions; an event by its offset and a partition\'s range read whole events from the streams, and whole documents written before are read as they are', async () => {
    // Three accounts of one partition, their events interleaved (the range read groups them by account).
    const partitions = config.kafka.eventsPartitions;
    const accounts = [fakeAccountId()];
    const partition = partitionForKey(accounts[0]!, partitions);
    while (accounts.length < 3) {
      const candidate = fakeAccountId();
      if (partitionForKey(candidate, partitions) === partition) accounts.push(candidate);
    }
    const envelopes = Array.from({ length: 24 }, (_, i) => buildEnvelope({ account_id: accounts[i % 3]!, type: i % 4 === 0 ? 'call.started' : 'message.received', data: { i, text: `event ${i}` } }, new Date()));
    const m = materializer();
    await m.start();
    const positions = await eventLog.publish(envelopes);
    await materialized(positions);
    const first = positions[0]!.offset;
    const end = positions.at(-1)!.offset;
    const expected = envelopes.map((e, i) => ({ id: e.id, type: e.type, data: e.data, cursor: encodeCursor(positions[i]!) }));

    const stored = await mongo.collections.events.find({ _id: { $in: envelopes.map((e) => e.id) } }).toArray();
    expect(stored).to.have.length(24);
    for (const doc of stored) expect(Object.keys(doc).sort(), 'no body in the events collection').to.deep.equal(['_id', 'account_id', 'offset', 'partition']);

    // One event by its offset (findEvent reads it so once the watermark reached it).
    const third = await readEventAt(mongo.collections.eventPages, { accountId: accounts[2]!, partition, offset: Number(positions[2]!.offset) });
    expect(third && docToRecord(third)).to.deep.include(expected[2]!);
    expect(await readEventAt(mongo.collections.eventPages, { accountId: accounts[1]!, partition, offset: Number(positions[2]!.offset) }), "another account's offset").to.equal(null);

    // The fan-out's gap fill: every account's events of a range, whole, in offset order; a limit cuts the range.
    const mine = (got: StoredEvent[]) => got.filter((e) => accounts.includes(e.accountId));
    const range = mine(await readPartition(mongo.collections.events, mongo.collections.eventPages, partition, first, end + 1n, 500, new PageCache(1 << 20)));
    expect(range.map((e) => ({ id: e.record.id, type: e.record.type, data: e.record.data, cursor: e.record.cursor }))).to.deep.equal(expected);
    expect(range.map((e) => e.accountId)).to.deep.equal(envelopes.map((e) => e.account_id));
    expect(range.map((e) => e.position.offset)).to.deep.equal(positions.map((p) => p.offset));
    const part = await readPartition(mongo.collections.events, mongo.collections.eventPages, partition, positions[5]!.offset, end + 1n, 4);
    expect(part.map((e) => e.record.id)).to.deep.equal(envelopes.slice(5, 9).map((e) => e.id));

    // A whole document written before the streams held the only copy: answered as it is.
    const old = buildEnvelope({ account_id: accounts[0]!, type: 'call.ended', data: { old: true } }, new Date());
    const oldAt = { partition, offset: end + 1000n };
    await mongo.collections.events.insertOne(toEventDoc(old, oldAt));
    const withOld = await readPartition(mongo.collections.events, mongo.collections.eventPages, partition, positions[20]!.offset, oldAt.offset + 1n, 500);
    expect(mine(withOld).map((e) => e.record.id)).to.deep.equal([...envelopes.slice(20).map((e) => e.id), old.id]);
    expect(withOld.at(-1)!.record).to.deep.include({ id: old.id, type: 'call.ended', data: { old: true }, cursor: encodeCursor(oldAt) });
  });
});
