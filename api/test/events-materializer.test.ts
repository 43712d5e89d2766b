import { expect } from 'chai';
import { encodeCursor, type Position } from '#shared/cursor.js';
import { buildEnvelope } from '#shared/eventlog/envelope.js';
import { EventLog } from '#shared/eventlog/event-log.js';
import { createConsumer, createKafka, topicCatalog, type Consumer } from '#shared/eventlog/kafka.js';
import { createLogger } from '#shared/log.js';
import { createMongo, type Mongo } from '#shared/mongo/index.js';
import { baseTestEnv } from '#test-support/env.js';
import { Materializer, type MaterializerOptions } from '../src/event-store/materializer.js';
import { readAfter } from '../src/event-store/store.js';
import { testApiConfig } from './support/api.js';
import { eventually, fakeAccountId, sleep } from './support/events.js';

describe('materializer crash safety', function () {
  this.timeout(90_000);
  const env = baseTestEnv();
  const config = testApiConfig({ EVENTS_TOPIC: `${env.EVENTS_TOPIC}-crash`, MONGO_DB: `${env.MONGO_DB}_crash` });
  const topic = config.kafka.eventsTopic;
  const log = createLogger('test', 'silent');
  const kafka = createKafka(config, log);
  let mongo: Mongo;
  let eventLog: EventLog;
  const running: Materializer[] = [];

  const materializer = (hook?: MaterializerOptions['afterWrite'], groupId = config.events.materializerGroupId, more: Partial<MaterializerOptions> = {}): Materializer => {
    const m = new Materializer({
      kafka,
      events: mongo.collections.events,
      watermarks: mongo.collections.watermarks,
      topic,
      groupId,
      log,
      chunkSize: 20,
      afterWrite: hook,
      ...more,
    });
    running.push(m);
    return m;
  };

  const watermarks = async (of = topic): Promise<Map<number, number>> =>
    new Map((await mongo.collections.watermarks.find({ topic: of }).toArray()).map((w) => [w.partition, w.offset]));

  before(async () => {
    mongo = createMongo(config);
    eventLog = new EventLog(kafka, topicCatalog(config).events, log);
    await eventLog.start();
  });

  afterEach(async () => {
    // Each test's materializers leave the group, so the next test's first one owns every partition.
    for (const m of running.splice(0)) await m.stop().catch(() => undefined);
  });

  after(async () => {
    await eventLog.stop();
    await mongo.close();
  });

  for (const stage of ['events', 'watermark'] as const) {
    it(`holds each event exactly once after the materializer dies mid-stream (after writing ${stage}) and another takes over`, async () => {
      const accounts = Array.from({ length: 6 }, () => fakeAccountId());
      const published: { id: string; position: Position }[] = [];
      const producing = (async () => {
        for (let round = 0; round < 30; round++) {
          const envelopes = Array.from({ length: 10 }, (_, i) => buildEnvelope({ account_id: accounts[(round + i) % accounts.length]!, type: 'call.started', data: { round, i } }, new Date()));
          const positions = await eventLog.publish(envelopes);
          envelopes.forEach((e, i) => published.push({ id: e.id, position: positions[i]! }));
          await sleep(30);
        }
      })();

      // The first materializer dies right after writing some events, before their watermark and commit.
      let writtenBeforeCrash = 0;
      const crashedAt = new Map<number, bigint>();
      const first = materializer((at, partition, firstOffset, lastOffset) => {
        if (at !== stage) return;
        writtenBeforeCrash += Number(lastOffset - firstOffset) + 1;
        if (writtenBeforeCrash < 80) return;
        crashedAt.set(partition, lastOffset);
        return 'crash';
      });
      await first.start();
      await eventually(async () => (crashedAt.size > 0 ? true : undefined), 30_000);
      const marksAtCrash = await watermarks();
      await first.stop();

      // Its successor starts from the committed offsets and rewrites what the first had written beyond them.
      const rewritten: { partition: number; first: bigint }[] = [];
      const second = materializer((at, partition, firstOffset) => {
        if (at === 'events') rewritten.push({ partition, first: firstOffset });
      });
      await second.start();
      await producing;

      const ends = new Map<number, number>();
      for (const p of published) ends.set(p.position.partition, Math.max(ends.get(p.position.partition) ?? -1, Number(p.position.offset)));
      const seenMarks: Map<number, number>[] = [];
      await eventually(async () => {
        const marks = await watermarks();
        seenMarks.push(marks);
        return [...ends].every(([p, end]) => (marks.get(p) ?? -1) >= end) ? true : undefined;
      }, 30_000, 20);

      const docs = await mongo.collections.events.find({ account_id: { $in: accounts } }).toArray();
      expect(docs).to.have.length(300);
      const at = (d: (typeof docs)[number]): string => encodeCursor({ partition: d.partition, offset: BigInt(d.offset) });
      expect(new Set(docs.map(at)).size).to.equal(300);
      const byId = new Map(docs.map((d) => [d._id, d]));
      for (const p of published) {
        const doc = byId.get(p.id);
        expect(doc, p.id).to.not.equal(undefined);
        expect(at(doc!)).to.equal(encodeCursor(p.position));
      }
      // The crash really left written-but-uncommitted events, and the successor wrote them again.
      const [crashPartition, crashOffset] = [...crashedAt][0]!;
      expect(rewritten.some((r) => r.partition === crashPartition && r.first <= crashOffset)).to.equal(true);
      // Watermarks never moved back, from the crash to the end.
      for (const [p] of ends) {
        const series = [marksAtCrash, ...seenMarks].map((m) => m.get(p) ?? -1);
        expect(series.every((v, i) => i === 0 || v >= series[i - 1]!), `partition ${p}: ${series.join(',')}`).to.equal(true);
      }
    });
  }

  it('writes a chunk bigger than one insert in slices of at most 500 events, each event once, also when every event is stored already, finding the stored ones by `_id` equality only', async () => {
    const account = fakeAccountId();
    const published: { id: string; position: Position }[] = [];
    for (let round = 0; round < 12; round++) {
      const envelopes = Array.from({ length: 100 }, (_, i) => buildEnvelope({ account_id: account, type: 'call.started', data: { round, i } }, new Date()));
      const positions = await eventLog.publish(envelopes);
      envelopes.forEach((e, i) => published.push({ id: e.id, position: positions[i]! }));
    }
    const partition = published[0]!.position.partition;
    const end = published.at(-1)!.position.offset;
    // The real collection, watched: how many documents each insert carries, and the filter of each read.
    const inserts: number[] = [];
    const reads: unknown[] = [];
    const events = new Proxy(mongo.collections.events, {
      get(target, key) {
        if (key === 'insertMany') {
          return (docs: Parameters<typeof target.insertMany>[0], options: Parameters<typeof target.insertMany>[1]) => {
            inserts.push(docs.length);
            return target.insertMany(docs, options);
          };
        }
        if (key === 'find' || key === 'findOne') {
          return (filter: Record<string, unknown>, ...rest: unknown[]) => {
            reads.push(filter);
            return (target[key] as (...a: unknown[]) => unknown).call(target, filter, ...rest);
          };
        }
        const value = Reflect.get(target, key, target) as unknown;
        return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    // Two new groups read the topic from the start in chunks of up to 2,000 (MATERIALIZER_CHUNK_EVENTS): the first writes the events, the second finds every one stored.
    for (const group of ['slices-a', 'slices-b']) {
      inserts.length = 0;
      reads.length = 0;
      let biggestChunk = 0;
      let done = false;
      const m = materializer(
        (at, p, firstOffset, lastOffset) => {
          if (at === 'events' && p === partition) biggestChunk = Math.max(biggestChunk, Number(lastOffset - firstOffset) + 1);
          if (at === 'watermark' && p === partition && lastOffset >= end) done = true;
        },
        `${config.events.materializerGroupId}.${group}`,
        { chunkSize: 2000, events },
      );
      await m.start();
      await eventually(async () => (done ? true : undefined), 60_000);
      await m.stop();
      expect(biggestChunk, `${group}: a chunk bigger than one insert`).to.be.above(500);
      expect(Math.max(...inserts), `${group}: documents per insert`).to.be.at.most(500);
      // `_id: {$in: …}` reads the whole collection on the test server (FerretDB on SQLite): seconds per chunk once history is large.
      if (group === 'slices-b') expect(reads.length, 'the stored copies were looked up').to.be.at.least(1200);
      for (const filter of reads) expect(Object.entries(filter as object).map(([k, v]) => [k, typeof v]), JSON.stringify(filter).slice(0, 120)).to.deep.equal([['_id', 'string']]);
      const docs = await mongo.collections.events.find({ account_id: account }).toArray();
      expect(docs, group).to.have.length(1200);
      const byId = new Map(docs.map((d) => [d._id, d]));
      for (const p of published) {
        const doc = byId.get(p.id);
        expect(doc && encodeCursor({ partition: doc.partition, offset: BigInt(doc.offset) }), p.id).to.equal(encodeCursor(p.position));
      }
    }
  });

  it('never moves a watermark back, even when the log is replayed from the start (offsets lost)', async () => {
    const before = await watermarks();
    const total = await mongo.collections.events.countDocuments({});
    expect(before.size).to.be.greaterThan(0);
    // A new group starts from the beginning and stops after raising its first watermark: offset 19 of some partition.
    let stoppedAt: { partition: number; offset: bigint } | null = null;
    const replay = materializer((at, partition, _first, lastOffset) => {
      if (at !== 'watermark' || stoppedAt) return;
      stoppedAt = { partition, offset: lastOffset };
      return 'crash';
    }, `${config.events.materializerGroupId}.replay`);
    await replay.start();
    const stopped = await eventually(async () => stoppedAt ?? undefined, 30_000);
    await replay.stop();
    expect(Number(stopped.offset)).to.be.below(before.get(stopped.partition)!);
    expect((await watermarks()).get(stopped.partition)).to.equal(before.get(stopped.partition));
    expect(await mongo.collections.events.countDocuments({})).to.equal(total);
  });

  it('raises a watermark with a journaled majority write, so the offsets it commits next cannot outlive the events (mongod killed)', async () => {
    // A client of its own with command monitoring (on whenever a slow-command threshold and a log are given).
    const monitored = createMongo({ ...config, mongo: { ...config.mongo, slowMs: 3_600_000 } }, { log });
    const sent: unknown[] = [];
    monitored.client.on('commandStarted', (e) => {
      if (e.commandName === 'update' && (e.command as { update?: string }).update === 'watermarks') sent.push((e.command as { writeConcern?: unknown }).writeConcern);
    });
    try {
      await eventLog.publish([buildEnvelope({ account_id: fakeAccountId(), type: 'call.started', data: {} }, new Date())]);
      let raised = false;
      const m = materializer((at) => {
        if (at !== 'watermark') return;
        raised = true;
        return 'crash';
      }, `${config.events.materializerGroupId}.journal`, { watermarks: monitored.collections.watermarks });
      await m.start();
      await eventually(async () => raised || undefined, 30_000);
      await m.stop();
      expect(sent.length).to.be.greaterThan(0);
      // FerretDB takes the option and ignores it (SQLite's own commit); MongoDB waits for its journal.
      for (const wc of sent) expect(wc).to.deep.equal({ w: 'majority', j: true });
    } finally {
      await monitored.close();
    }
  });

  it('is not taken for hung while a chunk write is slow but moving: it heartbeats between the steps of a chunk', async () => {
    // Its own topic: a new group reads from the beginning, and only these events should be slow to write.
    const slowTopic = `${topic}-slowchunk`;
    const slowLog = new EventLog(kafka, topicCatalog(testApiConfig({ EVENTS_TOPIC: slowTopic, MONGO_DB: config.mongo.dbName })).events, log);
    await slowLog.start();
    try {
      const account = fakeAccountId();
      const positions = await slowLog.publish(Array.from({ length: 6 }, (_, i) => buildEnvelope({ account_id: account, type: 'call.started', data: { i } }, new Date())));
      const events = mongo.collections.events;
      // Each insert takes 1.5 s: the chunk of 6 (one insert each) takes 9 s, well past the 4 s stall bound.
      const slow = Object.assign(Object.create(events) as typeof events, {
        insertMany: async (...args: Parameters<typeof events.insertMany>) => {
          await sleep(1500);
          return events.insertMany(...args);
        },
      });
      const m = new Materializer({ kafka, events: slow, watermarks: mongo.collections.watermarks, topic: slowTopic, groupId: `${slowTopic}.materializer`, log, chunkSize: 20, insertSlice: 1, stallMs: 4000 });
      running.push(m);
      await m.start();
      const { partition, offset } = positions.at(-1)!;
      await eventually(async () => {
        const w = await mongo.collections.watermarks.findOne({ topic: slowTopic, partition });
        return w && w.offset >= Number(offset) ? true : undefined;
      }, 60_000);
      expect(m.replaced, 'replaced by the watchdog while writing').to.equal(0);
    } finally {
      await slowLog.stop();
    }
  });

  it('replaces a consumer that shows no sign of life (a kafkajs restart that never came back), and the new one writes on', async () => {
    // A topic of its own: a new group reads its topic from the start, and the file's topic holds the other tests' 1,800
    // events by now, which a loaded machine did not read again in chunks of 20 within the wait. This one holds these 20 only.
    const stallTopic = `${topic}-stall`;
    const stallLog = new EventLog(kafka, { ...topicCatalog(config).events, name: stallTopic }, log);
    await stallLog.start();
    let made = 0;
    const m = materializer(undefined, `${config.events.materializerGroupId}-stall`, {
      topic: stallTopic,
      // Long enough that the real consumer's group join on a loaded machine does not look like a stall too.
      stallMs: 4000,
      // The first consumer stands in for the hung one: it connects, "runs", and is never heard from again.
      newConsumer: (k, g) => {
        made += 1;
        if (made > 1) return createConsumer(k, g);
        const real = createConsumer(k, g);
        return Object.assign(Object.create(real) as Consumer, { connect: async () => {}, subscribe: async () => {}, run: async () => {}, disconnect: async () => {}, on: () => () => {} });
      },
    });
    const envelopes = Array.from({ length: 20 }, (_, i) => buildEnvelope({ account_id: fakeAccountId(), type: 'call.started', data: { i } }, new Date()));
    const positions = await stallLog.publish(envelopes).finally(() => stallLog.stop());
    await m.start();
    // Only this materializer (its second consumer) can write these.
    await eventually(async () => {
      const now = await watermarks(stallTopic);
      return positions.every((p) => (now.get(p.partition) ?? -1) >= Number(p.offset)) || undefined;
    }, 30_000);
    // The hung stand-in was replaced; each replacement made exactly one new consumer.
    expect(m.replaced).to.be.at.least(1);
    expect(made).to.equal(m.replaced + 1);
    expect(await mongo.collections.events.countDocuments({ _id: { $in: envelopes.map((e) => e.id) } })).to.equal(20);
  });
  it('with a fetch fill, writes events that arrive over a short time as one or two chunks rather than one each', async () => {
    // A topic of its own (see the test above): only these events, so every chunk counted is of them.
    const fillTopic = `${topic}-fill`;
    const fillLog = new EventLog(kafka, { ...topicCatalog(config).events, name: fillTopic }, log);
    await fillLog.start();
    const chunks: [number, bigint, bigint][] = [];
    const m = materializer(
      (at, partition, firstOffset, lastOffset) => {
        if (at === 'watermark') chunks.push([partition, firstOffset, lastOffset]);
      },
      `${config.events.materializerGroupId}-fill`,
      { topic: fillTopic, chunkSize: 500, fetchFill: { minBytes: 1024 * 1024, maxWaitMs: 3000 } },
    );
    await m.start();
    // One account (one partition). A first event, written once the group has joined, then ten 60 ms apart:
    // fetches answered at once would see them one or two at a time.
    const account = fakeAccountId();
    const [primer] = await fillLog.publish([buildEnvelope({ account_id: account, type: 'call.started', data: { primer: true } }, new Date())]);
    await eventually(async () => ((await watermarks(fillTopic)).get(primer!.partition) === Number(primer!.offset) ? true : undefined), 30_000);
    const positions: Position[] = [];
    try {
      for (let i = 0; i < 10; i++) {
        positions.push(...(await fillLog.publish([buildEnvelope({ account_id: account, type: 'call.started', data: { i } }, new Date())])));
        await sleep(60);
      }
    } finally {
      await fillLog.stop();
    }
    const partition = positions[0]!.partition;
    await eventually(async () => ((await watermarks(fillTopic)).get(partition) === Number(positions.at(-1)!.offset) ? true : undefined), 30_000);
    const ours = chunks.filter(([p, , last]) => p === partition && last >= positions[0]!.offset);
    expect(ours.length, `chunks: ${JSON.stringify(ours.map(([, f, l]) => [Number(f), Number(l)]))}`).to.be.at.most(2);
    expect(await mongo.collections.events.countDocuments({ account_id: account })).to.equal(11);
  });

  describe('the same event id twice in the log (a keyed ingest retried after a lost reply)', () => {
    /**
     * Publishes `shape` (letters: one event each; a letter again is the same
     * envelope again) for a new account, runs a materializer until it is
     * written, and returns what history holds: the account's stream, the
     * type stream of the repeated event, and the stored event.
     */
    const run = async (shape: string[], more: Partial<MaterializerOptions>) => {
      const account = fakeAccountId();
      const byLetter = new Map<string, ReturnType<typeof buildEnvelope>>();
      const envelopes = shape.map((letter) => {
        let e = byLetter.get(letter);
        if (!e) {
          e = buildEnvelope({ account_id: account, type: letter === 'X' ? 'message.received' : 'call.started', data: { letter } }, new Date());
          byLetter.set(letter, e);
        }
        return e;
      });
      const positions = await eventLog.publish(envelopes);
      const partition = positions[0]!.partition;
      expect(positions.every((p, i) => p.partition === partition && (i === 0 || p.offset === positions[i - 1]!.offset + 1n)), 'one run of the partition').to.equal(true);
      const end = positions.at(-1)!.offset;
      const chunks: [bigint, bigint][] = [];
      let done = false;
      const m = materializer(
        (at, p, first, last) => {
          if (p !== partition) return;
          if (at === 'events') chunks.push([first, last]);
          if (at === 'watermark' && last >= end) done = true;
        },
        config.events.materializerGroupId,
        { pages: mongo.collections.eventPages, ...more },
      );
      await m.start();
      await eventually(async () => (done ? true : undefined), 60_000);
      await m.stop();
      const read = (types: ['message.received'] | null) =>
        readAfter(mongo.collections.eventPages, { accountId: account, partition, since: null, through: end, types, limit: 100 });
      const x = byLetter.get('X')!;
      const xAt = positions.map((p, i) => ({ p, letter: shape[i] })).filter((e) => e.letter === 'X').map((e) => e.p.offset);
      return { x, xAt, positions, chunks, history: await read(null), typed: await read(['message.received']), stored: await mongo.collections.events.findOne({ _id: x.id }) };
    };
    const sameChunk = (chunks: [bigint, bigint][], a: bigint, b: bigint) => chunks.some(([first, last]) => first <= a && b <= last);

    it('keeps it once, at its first position, when both copies fall into one chunk: [A, X, B, X]', async () => {
      const got = await run(['A', 'X', 'B', 'X'], { chunkSize: 2000 });
      expect(sameChunk(got.chunks, got.xAt[0]!, got.xAt[1]!), `both copies in one chunk: ${JSON.stringify(got.chunks, (_, v) => (typeof v === 'bigint' ? Number(v) : v))}`).to.equal(true);
      expect(got.history.map((d) => d.offset)).to.deep.equal(got.positions.slice(0, 3).map((p) => Number(p.offset)));
      expect(got.history.filter((d) => d._id === got.x.id).map((d) => d.offset)).to.deep.equal([Number(got.xAt[0])]);
      expect(got.typed.map((d) => [d._id, d.offset])).to.deep.equal([[got.x.id, Number(got.xAt[0])]]);
      expect(got.stored?.offset).to.equal(Number(got.xAt[0]));
    });

    it('keeps it once, at its first position, when the copies are in two insert slices of one chunk', async () => {
      const got = await run(['A', 'X', 'B', 'C', 'D', 'X'], { chunkSize: 2000, insertSlice: 2 });
      expect(sameChunk(got.chunks, got.xAt[0]!, got.xAt[1]!), 'both copies in one chunk').to.equal(true);
      expect(got.history.map((d) => d.offset)).to.deep.equal(got.positions.slice(0, 5).map((p) => Number(p.offset)));
      expect(got.typed.map((d) => [d._id, d.offset])).to.deep.equal([[got.x.id, Number(got.xAt[0])]]);
      expect(got.stored?.offset).to.equal(Number(got.xAt[0]));
    });

    it('keeps it once, at its first position, when the second copy comes in a later chunk', async () => {
      const got = await run(['A', 'X', 'B', 'X'], { chunkSize: 2 });
      expect(sameChunk(got.chunks, got.xAt[0]!, got.xAt[1]!), 'the copies in two chunks').to.equal(false);
      expect(got.history.map((d) => d.offset)).to.deep.equal(got.positions.slice(0, 3).map((p) => Number(p.offset)));
      expect(got.typed.map((d) => [d._id, d.offset])).to.deep.equal([[got.x.id, Number(got.xAt[0])]]);
      expect(got.stored?.offset).to.equal(Number(got.xAt[0]));
    });
  });
});
