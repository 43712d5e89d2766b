import { expect } from 'chai';
import { encodeCursor } from '#shared/cursor.js';
import type { EventType } from '#shared/eventlog/types.js';
import type { EventDoc, StoredEventDoc, EventPageDirDoc, EventPageDoc, EventPageHeadDoc } from '#shared/mongo/documents.js';
import { dirId, fragmentId, headId, pageEvents, pageId, PageWriter, streamId, type PagesCollection } from './pages.js';
import { readAfter, readRange } from './store.js';
import { backfillPages } from './backfill.js';
import { PageCache } from './page-cache.js';
import { inflateRawSync } from 'node:zlib';
import { Binary, BSON, type Collection } from 'mongodb';

type Doc = EventPageDoc | EventPageHeadDoc | EventPageDirDoc;
type Filter = Record<string, unknown>;
type BulkOp = { updateOne: { filter: Filter } } | { replaceOne: { filter: Filter; replacement: Doc; upsert?: boolean } } | { deleteOne: { filter: Filter } };

/**
 * An in-memory stand-in for the event_pages collection that records every
 * filter it is sent: enough of findOne and replaceOne (with upsert)
 * for the store module, and nothing else (any other call fails the test).
 */
class FakePages {
  readonly docs = new Map<string, Doc>();
  readonly reads: Filter[] = [];
  readonly writes: Filter[] = [];
  /** Write commands sent (a bulkWrite, an insertMany, a single write), and replaces of a stored page or fragment (a document holding events). */
  commands = 0;
  rewrites = 0;

  /** Reads of a partition's retention floor (retention.ts): one per partition every few seconds, kept apart from the streams' lookups. */
  floorReads = 0;

  findOne(filter: Filter): Promise<Doc | null> {
    if (typeof filter._id === 'string' && filter._id.startsWith('#floor:')) this.floorReads += 1;
    else this.reads.push(filter);
    const doc = this.docs.get(filter._id as string);
    return Promise.resolve(doc && matches(doc, filter) ? structuredClone(doc) : null);
  }

  replaceOne(filter: Filter, replacement: Doc, options: { upsert?: boolean } = {}): Promise<void> {
    this.writes.push(filter);
    const id = filter._id as string;
    const current = this.docs.get(id);
    if (current && 'first' in current && !id.startsWith('#')) this.rewrites += 1;
    if ((current && matches(current, filter)) || (!current && options.upsert)) this.docs.set(id, structuredClone(replacement));
    return Promise.resolve();
  }

  insertOne(doc: Doc): Promise<void> {
    this.commands += 1;
    this.writes.push({ _id: doc._id });
    if (this.docs.has(doc._id)) return Promise.reject(Object.assign(new Error('E11000 duplicate key'), { code: 11000 }));
    this.docs.set(doc._id, structuredClone(doc));
    return Promise.resolve();
  }

  /** The claims' hint: `$max` by `_id`, upserted. */
  updateOne(filter: Filter, update: { $max: Record<string, number> }): Promise<void> {
    this.commands += 1;
    this.writes.push(filter);
    const id = filter._id as string;
    const current = (this.docs.get(id) ?? { _id: id }) as unknown as Record<string, unknown>;
    for (const [k, v] of Object.entries(update.$max)) if (!(typeof current[k] === 'number' && (current[k] as number) >= v)) current[k] = v;
    this.docs.set(id, current as unknown as Doc);
    return Promise.resolve();
  }

  /** The chunk's fragments: inserts in order, stopping at the first `_id` taken. */
  async insertMany(docs: Doc[]): Promise<void> {
    this.commands += 1;
    for (const [index, doc] of docs.entries()) {
      this.writes.push({ _id: doc._id });
      if (this.docs.has(doc._id)) throw Object.assign(new Error('E11000 duplicate key'), { code: 11000, writeErrors: [{ index, code: 11000 }] });
      this.docs.set(doc._id, structuredClone(doc));
    }
    return Promise.resolve();
  }

  /** An ordered bulk: the guard ($inc on the next claim, refused when its `fence` is a string), replaces and deletes by `_id`. */
  async bulkWrite(ops: BulkOp[]): Promise<void> {
    this.commands += 1;
    for (const [index, op] of ops.entries()) {
      if ('updateOne' in op) {
        this.writes.push(op.updateOne.filter);
        const claim = this.docs.get(op.updateOne.filter._id as string) as unknown as { fence?: unknown } | undefined;
        if (claim && typeof claim.fence === 'string') throw Object.assign(new Error('Cannot apply $inc'), { writeErrors: [{ index, code: 14 }] });
      } else if ('replaceOne' in op) await this.replaceOne(op.replaceOne.filter, op.replaceOne.replacement, { upsert: op.replaceOne.upsert });
      else if ('deleteOne' in op) {
        this.writes.push(op.deleteOne.filter);
        this.docs.delete(op.deleteOne.filter._id as string);
      } else throw new Error(`unexpected bulk op ${JSON.stringify(op)}`);
    }
  }

  asCollection(): PagesCollection {
    return new Proxy(this, {
      get: (target, prop) => {
        if (prop === 'findOne' || prop === 'replaceOne' || prop === 'insertOne' || prop === 'insertMany' || prop === 'updateOne' || prop === 'bulkWrite') return (target[prop] as (...a: unknown[]) => unknown).bind(target);
        throw new Error(`the store module called ${String(prop)} on event_pages: only _id lookups and writes are expected`);
      },
    }) as unknown as PagesCollection;
  }
}

/** The streams' documents (pages, directories, heads), without the writers' claims (`#claim:…`, see pages.ts). */
function streamDocs(fake: FakePages): [string, Doc][] {
  return [...fake.docs.entries()].filter(([id]) => !id.startsWith('#'));
}

function matches(doc: Doc, filter: Filter): boolean {
  for (const [key, cond] of Object.entries(filter)) {
    const value = (doc as unknown as Record<string, unknown>)[key];
    if (cond !== null && typeof cond === 'object') {
      const lt = (cond as { $lt?: number }).$lt;
      if (lt === undefined || Object.keys(cond).length !== 1) throw new Error(`unexpected condition ${JSON.stringify(cond)}`);
      if (!(typeof value === 'number' && value < lt)) return false;
    } else if (value !== cond) return false;
  }
  return true;
}

const PARTITION = 3;

function ev(accountId: string, offset: number, type: EventType = 'message.received', data: Record<string, unknown> = {}): EventDoc {
  const position = { partition: PARTITION, offset: BigInt(offset) };
  return { _id: `ev_${accountId}_${offset}`, account_id: accountId, type, data, created_at: new Date(0), partition: PARTITION, offset, cursor: encodeCursor(position) };
}

/** Writes `docs` as one chunk covering offsets first..last of the log, then compacts (as the materializer does after the watermark). */
async function write(writer: PageWriter, docs: EventDoc[], first = docs[0]!.offset, last = docs.at(-1)!.offset): Promise<boolean> {
  if (!(await writer.write(PARTITION, docs, BigInt(first), BigInt(last)))) return false;
  await writer.compact(PARTITION, BigInt(first));
  return true;
}

const after = (since: number | null, more: { types?: EventType[]; limit?: number; through?: number; accountId?: string } = {}) => ({
  accountId: more.accountId ?? 'acc_a',
  partition: PARTITION,
  since: since === null ? null : { partition: PARTITION, offset: BigInt(since) },
  through: BigInt(more.through ?? 1e12),
  types: more.types ?? null,
  limit: more.limit ?? 100,
});

const offsets = (docs: EventDoc[]): number[] => docs.map((d) => d.offset);
const range = (from: number, to: number): number[] => Array.from({ length: to - from + 1 }, (_, i) => from + i);

function isIdEquality(filter: Filter): boolean {
  return Object.keys(filter).length === 1 && typeof filter._id === 'string';
}

describe('event store: account streams of pages, read by _id (pages.ts, store.ts)', () => {
  it('sends only _id equality filters on every read path (readAfter, readRange, with and without types), and writes address pages by _id', async () => {
    const fake = new FakePages();
    const writer = new PageWriter(fake.asCollection(), { pageEvents: 10 });
    const docs = range(0, 499).map((o) => ev(o % 2 === 0 ? 'acc_a' : 'acc_b', o, o % 50 === 0 ? 'call.started' : 'message.received'));
    for (let i = 0; i < docs.length; i += 37) await write(writer, docs.slice(i, i + 37), i, Math.min(i + 36, 499));
    expect(fake.reads.every(isIdEquality), JSON.stringify(fake.reads.find((f) => !isIdEquality(f)))).to.equal(true);
    expect(fake.writes.every(isIdEquality), 'writes filter by _id alone (FerretDB pushes down nothing else)').to.equal(true);
    fake.reads.length = 0;
    const pages = fake.asCollection();
    await readAfter(pages, after(null));
    await readAfter(pages, after(101, { limit: 7 }));
    await readAfter(pages, after(101, { types: ['call.started'] }));
    await readAfter(pages, after(null, { types: ['call.started', 'message.received'], limit: 5 }));
    await readRange(pages, { accountId: 'acc_b', partition: PARTITION, after: 10n, before: 300n, types: null, limit: 100 });
    await readRange(pages, { accountId: 'acc_b', partition: PARTITION, after: -1n, before: 300n, types: ['message.received'], limit: 3 });
    expect(fake.reads.length).to.be.greaterThan(0);
    for (const filter of fake.reads) expect(isIdEquality(filter), JSON.stringify(filter)).to.equal(true);
  });

  it('writes a chunk in two commands however many streams it touches, each event\'s bytes once; compacts in a few commands; never rewrites a document holding events; type streams hold offsets', async () => {
    const fake = new FakePages();
    const writer = new PageWriter(fake.asCollection(), { fragments: 4 });
    const types: EventType[] = ['message.received', 'call.started', 'call.ended'];
    let offset = 0;
    const chunk = (): EventDoc[] => range(0, 199).map((i) => ev(`acc_${i % 50}`, offset++, types[i % 3]!));
    await writer.write(PARTITION, chunk(), 0n, 199n); // the first chunk claims the partition
    const runs: number[] = [];
    for (let i = 1; i < 12; i++) {
      const docs = chunk();
      fake.commands = 0;
      await writer.write(PARTITION, docs, BigInt(docs[0]!.offset), BigInt(docs.at(-1)!.offset));
      expect(fake.commands, 'the journal entry (fenced) and one insert of the fragments').to.equal(2);
      fake.commands = 0;
      const compacted = await writer.compact(PARTITION, BigInt(docs[0]!.offset));
      runs.push(compacted);
      // 50 accounts fall due together every fourth chunk: at most 16 of them per run (the rest with the next chunks),
      // their pages, directories and heads a few streams to a command, then one delete.
      expect(compacted, `streams compacted after chunk ${i}`).to.be.at.most(16);
      expect(fake.commands, `compaction after chunk ${i}`).to.be.at.most(compacted === 0 ? 0 : 12);
    }
    expect(runs.slice(0, 3), `nothing due before a stream's fourth fragment (chunk 3), then the most a run may take: ${runs}`).to.deep.equal([0, 0, 16]);
    expect(runs.reduce((a, b) => a + b, 0), `every stream compacted at least once: ${runs}`).to.be.at.least(50);
    expect(fake.rewrites, 'replaces of a stored page or fragment').to.equal(0);
    // Each event is in one fragment or page of its account's stream; its type stream holds its offset only.
    const typeStream = streamId('acc_7', PARTITION, 'call.started');
    const typePages = streamDocs(fake).filter(([id]) => id.startsWith(`${typeStream}:`) && /^:\d+$/.test(id.slice(typeStream.length)));
    expect(typePages.length).to.be.greaterThan(0);
    for (const [, page] of typePages) for (const entry of pageEvents(page as EventPageDoc)) expect(Object.keys(entry)).to.deep.equal(['offset']);
    const all = range(0, 12 * 200 - 1).filter((o) => o % 200 % 50 === 7);
    expect(offsets(await readAfter(fake.asCollection(), after(null, { accountId: 'acc_7', limit: 1000 })))).to.deep.equal(all);
    expect(offsets(await readAfter(fake.asCollection(), after(null, { accountId: 'acc_7', limit: 1000, types: ['call.started'] })))).to.deep.equal(all.filter((o) => o % 200 % 3 === 1));
  });

  it('reads a page of 100 with a bounded number of lookups whatever the history (100,000 events): the head, a directory and at most two pages', async () => {
    const fake = new FakePages();
    const writer = new PageWriter(fake.asCollection());
    for (let i = 0; i < 100_000; i += 5000) await write(writer, range(i, i + 4999).map((o) => ev('acc_a', o)));
    for (const since of [null, 0, 99, 150, 54_321, 99_850]) {
      fake.reads.length = 0;
      const page = await readAfter(fake.asCollection(), after(since));
      const first = since === null ? 0 : since + 1;
      expect(offsets(page)).to.deep.equal(range(first, Math.min(first + 99, 99_999)));
      expect(fake.reads.length, `lookups for since=${since}: ${JSON.stringify(fake.reads)}`).to.be.at.most(4);
    }
  });

  it('pages across page boundaries and from a cursor in the middle of a page: every event once, in order', async () => {
    const fake = new FakePages();
    const writer = new PageWriter(fake.asCollection(), { pageEvents: 4, dirPages: 3 });
    // The account's events are sparse on the partition (other accounts in between).
    const mine = range(0, 59).map((i) => ev('acc_a', i * 3));
    const others = range(0, 59).map((i) => ev('acc_b', i * 3 + 1));
    const all = [...mine, ...others].sort((a, b) => a.offset - b.offset);
    await write(writer, all.slice(0, 24), 0, 35);
    await write(writer, all.slice(24), 36, 178);
    const stream = streamId('acc_a', PARTITION, null);
    const head = fake.docs.get(headId(stream)) as EventPageHeadDoc;
    // 15 pages of 4 events, listed by directories of 3 pages.
    expect(head).to.deep.include({ pages: 15, per_dir: 3, dirs: range(0, 4).map((k) => k * 36) });
    expect((fake.docs.get(dirId(stream, 1)) as EventPageDirDoc).starts).to.deep.equal([36, 48, 60]);
    // Paging by 5 from the start crosses a page boundary on every page.
    const seen: number[] = [];
    let since: number | null = null;
    for (;;) {
      const page = await readAfter(fake.asCollection(), after(since, { limit: 5 }));
      if (page.length === 0) break;
      seen.push(...offsets(page));
      since = page.at(-1)!.offset;
    }
    expect(seen).to.deep.equal(mine.map((d) => d.offset));
    // A cursor on the second event of a page (offset 15 = page 1's second), between two events (16), before the first (-1).
    expect(offsets(await readAfter(fake.asCollection(), after(15, { limit: 3 })))).to.deep.equal([18, 21, 24]);
    expect(offsets(await readAfter(fake.asCollection(), after(16, { limit: 3 })))).to.deep.equal([18, 21, 24]);
    expect(offsets(await readAfter(fake.asCollection(), after(-1, { limit: 2 })))).to.deep.equal([0, 3]);
    // A cursor on another account's event.
    expect(offsets(await readAfter(fake.asCollection(), after(13, { limit: 2 })))).to.deep.equal([15, 18]);
    // The last event: nothing after it.
    expect(offsets(await readAfter(fake.asCollection(), after(177)))).to.deep.equal([]);
    // readRange stops before `before`.
    const r = await readRange(fake.asCollection(), { accountId: 'acc_a', partition: PARTITION, after: 10n, before: 24n, types: null, limit: 100 });
    expect(r.map((e) => Number(e.position.offset))).to.deep.equal([12, 15, 18, 21]);
  });

  it('never returns events above the watermark (through), even when their pages are written', async () => {
    const fake = new FakePages();
    const writer = new PageWriter(fake.asCollection(), { pageEvents: 4 });
    await write(writer, range(0, 19).map((o) => ev('acc_a', o)));
    expect(offsets(await readAfter(fake.asCollection(), after(5, { through: 9 })))).to.deep.equal(range(6, 9));
    expect(offsets(await readAfter(fake.asCollection(), after(9, { through: 9 })))).to.deep.equal([]);
  });

  it('reads a rare type from its own stream: one head and one page, not the account\'s history', async () => {
    const fake = new FakePages();
    const writer = new PageWriter(fake.asCollection());
    const docs = range(0, 49_999).map((o) => ev('acc_a', o, o === 20_000 || o === 45_000 ? 'call.takeover' : 'message.received'));
    for (let i = 0; i < docs.length; i += 2500) await write(writer, docs.slice(i, i + 2500));
    fake.reads.length = 0;
    expect(offsets(await readAfter(fake.asCollection(), after(null, { types: ['call.takeover'] })))).to.deep.equal([20_000, 45_000]);
    // The type stream's head, its fragments (one lookup, then a batch of four) and its head again; the account's head, and a directory and a page for each event.
    expect(fake.reads.length, JSON.stringify(fake.reads)).to.be.at.most(12);
    expect(fake.reads.filter((f) => /^acc_a:3:\d+$/.test(f._id as string)), 'only the account pages holding the two events').to.have.length(2);
    fake.reads.length = 0;
    expect(offsets(await readAfter(fake.asCollection(), after(20_000, { types: ['call.takeover'] })))).to.deep.equal([45_000]);
    expect(offsets(await readAfter(fake.asCollection(), after(45_000, { types: ['call.takeover'] })))).to.deep.equal([]);
    expect(offsets(await readAfter(fake.asCollection(), after(null, { types: ['call.ended'] })))).to.deep.equal([]);
    expect(fake.reads.length, 'three reads of one rare type').to.be.at.most(30);
    // Two types: both streams, merged in offset order.
    const two = await readAfter(fake.asCollection(), after(19_998, { types: ['call.takeover', 'message.received'], limit: 4 }));
    expect(offsets(two)).to.deep.equal([19_999, 20_000, 20_001, 20_002]);
  });

  it('stores each event once when the same batch is written again: by the same writer, a fresh one (after a crash), or from an earlier offset', async () => {
    const fake = new FakePages();
    const docs = range(0, 29).map((o) => ev('acc_a', o, o % 3 === 0 ? 'call.started' : 'message.received'));
    const first = new PageWriter(fake.asCollection(), { pageEvents: 7, dirPages: 2 });
    await write(first, docs.slice(0, 20));
    const snapshot = structuredClone(streamDocs(fake));
    await write(first, docs.slice(0, 20)); // a chunk delivered again to the same writer (it does not follow the last one: reloaded)
    expect(streamDocs(fake)).to.deep.equal(snapshot);
    const second = new PageWriter(fake.asCollection(), { pageEvents: 7, dirPages: 2 });
    await write(second, docs.slice(10, 30)); // the next owner resumes from an older committed offset
    const third = new PageWriter(fake.asCollection(), { pageEvents: 7, dirPages: 2 });
    await write(third, docs.slice(0, 30));
    expect(offsets(await readAfter(fake.asCollection(), after(null)))).to.deep.equal(range(0, 29));
    expect(offsets(await readAfter(fake.asCollection(), after(null, { types: ['call.started'] })))).to.deep.equal(range(0, 9).map((i) => i * 3));
    // No offset is stored twice in a stream, whatever the writers did.
    for (const stream of [streamId('acc_a', PARTITION, null), streamId('acc_a', PARTITION, 'call.started'), streamId('acc_a', PARTITION, 'message.received')]) {
      const held = streamDocs(fake)
        .filter(([id]) => id.startsWith(`${stream}:`) && /^:f?\d+$/.test(id.slice(stream.length)))
        .flatMap(([, d]) => pageEvents(d as EventPageDoc).map((e) => e.offset));
      expect(held.length, stream).to.equal(new Set(held).size);
    }
  });

  it('recovers from a crash after the fragments (before the watermark): a successor writing the batch again adds only what is missing', async () => {
    const fake = new FakePages();
    let crash = true;
    const docs = range(0, 29).map((o) => ev('acc_a', o));
    const w1 = new PageWriter(fake.asCollection(), { pageEvents: 7, dirPages: 2, afterPages: () => (crash ? 'crash' : undefined) });
    await write(new PageWriter(fake.asCollection(), { pageEvents: 7, dirPages: 2 }), docs.slice(0, 5));
    expect(await write(w1, docs.slice(5, 20))).to.equal(false);
    // The fragment is there; readers bounded by the watermark (4) see up to it.
    expect(fake.docs.has(fragmentId(streamId('acc_a', PARTITION, null), 1))).to.equal(true);
    expect(offsets(await readAfter(fake.asCollection(), after(null, { through: 4 })))).to.deep.equal(range(0, 4));
    crash = false;
    const w2 = new PageWriter(fake.asCollection(), { pageEvents: 7, dirPages: 2 });
    await write(w2, docs.slice(3, 30));
    expect(offsets(await readAfter(fake.asCollection(), after(null)))).to.deep.equal(range(0, 29));
  });

  it('a compaction stopped half-way (pages written, head not) is done again by the next one; a fragment deleted under a read is told from the stream\'s end', async () => {
    const fake = new FakePages();
    const stream = streamId('acc_a', PARTITION, null);
    const writer = new PageWriter(fake.asCollection(), { pageEvents: 100, dirPages: 2, fragments: 3, duePerRun: 1 });
    await write(writer, range(0, 3).map((o) => ev('acc_a', o)));
    await write(writer, range(4, 5).map((o) => ev('acc_a', o)));
    // The third fragment makes the stream due: its head write fails once.
    const replace = fake.replaceOne.bind(fake);
    let failed = false;
    fake.replaceOne = (filter, doc, options) => {
      if (!failed && filter._id === headId(stream)) {
        failed = true;
        return Promise.reject(new Error('store went away'));
      }
      return replace(filter, doc, options);
    };
    await writer.write(PARTITION, range(6, 6).map((o) => ev('acc_a', o)), 6n, 6n);
    let error: unknown = null;
    await writer.compact(PARTITION, 6n).catch((err: unknown) => (error = err));
    expect(String(error)).to.match(/went away/);
    expect(fake.docs.has(pageId(stream, 0)), 'a page written').to.equal(true);
    expect(fake.docs.has(headId(stream)), 'no head yet').to.equal(false);
    expect(offsets(await readAfter(fake.asCollection(), after(null)))).to.deep.equal(range(0, 6));
    // The next chunk (a fresh state, read from the store) compacts again.
    await write(writer, range(7, 8).map((o) => ev('acc_a', o)));
    const head = fake.docs.get(headId(stream)) as EventPageHeadDoc;
    expect(head).to.deep.include({ through: 8, frag: 4 });
    expect(offsets(await readAfter(fake.asCollection(), after(null)))).to.deep.equal(range(0, 8));
    expect(offsets(await readAfter(fake.asCollection(), after(3, { limit: 3 })))).to.deep.equal([4, 5, 6]);
    // A reader that read the head before a compaction, whose fragments are then deleted, reads the head again and starts over.
    await write(writer, range(9, 10).map((o) => ev('acc_a', o)));
    const findOne = fake.findOne.bind(fake);
    let compacted = false;
    fake.findOne = async (filter) => {
      const found = await findOne(filter);
      if (!compacted && filter._id === headId(stream)) {
        compacted = true;
        await write(writer, [ev('acc_a', 11)]);
        await write(writer, [ev('acc_a', 12)]);
        expect((fake.docs.get(headId(stream)) as EventPageHeadDoc).frag, 'compacted under the read').to.equal(7);
      }
      return found;
    };
    expect(offsets(await readAfter(fake.asCollection(), after(null, { through: 12 })))).to.deep.equal(range(0, 12));
  });

  it('starts a stream over when the topic was deleted and created again (a new topic id, offsets from 0 again); a writer waits for the topic check', async () => {
    const fake = new FakePages();
    const old = range(0, 9).map((o) => ev('acc_a', o));
    await write(new PageWriter(fake.asCollection(), { pageEvents: 4, topicId: () => 'topic-1' }), old);
    expect(offsets(await readAfter(fake.asCollection(), after(null)))).to.deep.equal(range(0, 9));
    const reborn = [{ ...ev('acc_a', 0), _id: 'evt_new_life_0' }];
    const unchecked = new PageWriter(fake.asCollection(), { pageEvents: 4, topicId: () => null });
    let refused: unknown = null;
    await write(unchecked, reborn).catch((err: unknown) => (refused = err));
    expect(String(refused)).to.match(/not checked/);
    await write(new PageWriter(fake.asCollection(), { pageEvents: 4, topicId: () => 'topic-2' }), reborn);
    const page = await readAfter(fake.asCollection(), after(null, { through: 0 }));
    expect(page.map((d) => d._id)).to.deep.equal(['evt_new_life_0']);
    // The same topic id again (a restart): the stream goes on, nothing starts over.
    await write(new PageWriter(fake.asCollection(), { pageEvents: 4, topicId: () => 'topic-2' }), [ev('acc_a', 1)]);
    expect(offsets(await readAfter(fake.asCollection(), after(null)))).to.deep.equal([0, 1]);
  });

  it('bounds a page by bytes as well as by count: a big event gets a page of its own', async () => {
    const fake = new FakePages();
    const writer = new PageWriter(fake.asCollection(), { pageEvents: 100, pageBytes: 4096, fragments: 1, duePerRun: 1 });
    const big = 'x'.repeat(6000);
    const docs = range(0, 9).map((o) => ev('acc_a', o, 'message.received', o === 4 ? { big } : { small: o }));
    await write(writer, docs);
    const stream = streamId('acc_a', PARTITION, null);
    expect((fake.docs.get(dirId(stream, 0)) as EventPageDirDoc).starts).to.deep.equal([0, 4, 5]);
    for (const n of [0, 2]) expect((fake.docs.get(pageId(stream, n)) as EventPageDoc).bytes).to.be.at.most(4096);
    expect(offsets(await readAfter(fake.asCollection(), after(2, { limit: 4 })))).to.deep.equal([3, 4, 5, 6]);
  });

  it('stores a page\'s events packed in one binary field, and still reads and extends pages stored nested (the layout before it)', async () => {
    const fake = new FakePages();
    const docs = range(0, 24).map((o) => ev('acc_a', o, 'message.received', { n: o, at: new Date(o * 1000), nested: { list: [o, String(o)] } }));
    await write(new PageWriter(fake.asCollection(), { pageEvents: 10 }), docs.slice(0, 15));
    const stream = streamId('acc_a', PARTITION, null);
    const stored = fake.docs.get(pageId(stream, 0)) as EventPageDoc;
    expect(stored.events, 'no nested events in a packed page').to.equal(undefined);
    expect(stored.deflated, 'packed and deflated').to.not.equal(undefined);
    expect(stored).to.deep.include({ first: 0, last: 9, count: 10 });
    expect(pageEvents(stored)).to.deep.equal(docs.slice(0, 10));
    // The store as an earlier version wrote it: every page's events nested (a type stream's too, whole events), heads without `frag` and `through`.
    const byOffset = new Map(docs.map((d) => [d.offset, d]));
    for (const [id, doc] of streamDocs(fake)) {
      if ('pages' in doc) {
        const { frag: _frag, through: _through, ...head } = doc;
        fake.docs.set(id, head);
      }
      if (!('first' in doc)) continue;
      const { deflated: _deflated, count: _count, ...rest } = doc;
      fake.docs.set(id, { ...rest, events: pageEvents(doc).map((e) => byOffset.get(e.offset)!) });
    }
    expect(await readAfter(fake.asCollection(), after(null))).to.deep.equal(docs.slice(0, 15));
    expect(await readAfter(fake.asCollection(), after(null, { types: ['message.received'] }))).to.deep.equal(docs.slice(0, 15));
    expect(offsets(await readAfter(fake.asCollection(), after(7, { limit: 4 })))).to.deep.equal([8, 9, 10, 11]);
    // A writer of this version leaves the pages as they are (the newest one too) and appends after them.
    await write(new PageWriter(fake.asCollection(), { pageEvents: 10 }), docs.slice(15));
    expect((fake.docs.get(pageId(stream, 0)) as EventPageDoc).events, 'a full page is left as it is').to.have.length(10);
    expect((fake.docs.get(pageId(stream, 1)) as EventPageDoc).events, 'the newest page too').to.have.length(5);
    expect((fake.docs.get(pageId(stream, 2)) as EventPageDoc).events).to.equal(undefined);
    expect(await readAfter(fake.asCollection(), after(null))).to.deep.equal(docs);
    expect(await readAfter(fake.asCollection(), after(null, { types: ['message.received'] }))).to.deep.equal(docs);
    expect(offsets(await readAfter(fake.asCollection(), after(12, { limit: 4, types: ['message.received'] })))).to.deep.equal([13, 14, 15, 16]);
  });

  it('stores entries deflated, without what the stream implies (account, partition, cursor), and reads back events identical to those written, with and without a cache', async () => {
    const fake = new FakePages();
    const body = { text: 'Running about ten minutes late, see you at the usual place.', to: '+14155550199' };
    const docs = range(0, 24).map((o) => {
      const doc = ev('acc/ü:1', o, o % 4 === 0 ? 'call.ended' : 'message.received', { ...body, n: o, at: new Date(o * 1000), nested: { list: [o, String(o), null] } });
      if (o % 3 === 0) doc.occurred_at = new Date(o * 7);
      if (o === 5) return { ...doc, data: {}, data_unavailable: true as const };
      if (o === 6) return { ...doc, cursor: 'c1_not-derived' }; // not what the stream implies: stored as it is
      return doc;
    });
    const writer = new PageWriter(fake.asCollection(), { pageEvents: 10, topicId: () => 'topic-1' });
    await write(writer, docs.slice(0, 22));
    await writer.write(PARTITION, docs.slice(22), 22n, 24n); // left as a fragment
    const stream = streamId('acc/ü:1', PARTITION, null);
    const fragment = fake.docs.get(fragmentId(stream, 1)) as EventPageDoc;
    for (const [id, first, last] of [[pageId(stream, 0), 0, 9], [pageId(stream, 2), 20, 21], [fragmentId(stream, 1), 22, 24]] as const) {
      const stored = fake.docs.get(id) as EventPageDoc;
      expect(stored.packed, id).to.equal(undefined);
      expect(stored.events, id).to.equal(undefined);
      const bson = inflateRawSync(stored.deflated!.buffer.subarray(0, stored.deflated!.position));
      expect(bson.byteLength, `${id}: bytes counts the whole events' BSON`).to.be.lessThan(stored.bytes);
      expect(stored.bytes).to.equal(docs.slice(first, last + 1).reduce((n, d) => n + BSON.calculateObjectSize(d), 0));
      expect(stored.deflated!.position, `${id}: deflated`).to.be.lessThan(bson.byteLength);
      const raw = (BSON.deserialize(bson) as { events: Record<string, unknown>[] }).events;
      for (const e of raw) {
        const o = e.offset as number;
        expect(Object.keys(e), `${id} offset ${o}`).to.not.include.members(['partition']);
        if (o !== 6) expect(e, `offset ${o}`).to.not.have.property('cursor');
        expect(e, `offset ${o}`).to.not.have.property('account_id');
      }
      expect(pageEvents(stored), id).to.deep.equal(docs.slice(first, last + 1));
    }
    expect(fragment.first).to.equal(22);
    const cache = new PageCache(1 << 20);
    for (const types of [undefined, ['call.ended'], ['message.received']] as (EventType[] | undefined)[]) {
      const want = docs.filter((d) => !types || types.includes(d.type));
      for (const c of [undefined, cache, cache]) {
        const got = await readAfter(fake.asCollection(), after(null, { accountId: 'acc/ü:1', types }), c);
        expect(got, `types ${String(types)}`).to.deep.equal(want);
        for (const [i, d] of got.entries()) expect(Object.keys(d).sort()).to.deep.equal(Object.keys(want[i]!).sort());
      }
    }
    expect(cache.stats.hits).to.be.greaterThan(0);
  });

  it('reads pages and fragments stored packed but not deflated (whole events, the layout before deflating), and appends deflated pages after them', async () => {
    const fake = new FakePages();
    const docs = range(0, 29).map((o) => ev('acc_a', o, o % 2 ? 'call.ended' : 'message.received', { n: o }));
    await write(new PageWriter(fake.asCollection(), { pageEvents: 10, topicId: () => 'topic-1' }), docs.slice(0, 15));
    await new PageWriter(fake.asCollection(), { pageEvents: 10, topicId: () => 'topic-1' }).write(PARTITION, docs.slice(15, 18), 15n, 17n);
    // As the version before wrote them: `packed`, the BSON of the whole entries, not deflated.
    let rewritten = 0;
    for (const [id, doc] of streamDocs(fake)) {
      if (!('first' in doc) || !doc.deflated) continue;
      const { deflated: _deflated, ...rest } = doc;
      fake.docs.set(id, { ...rest, packed: new Binary(BSON.serialize({ events: pageEvents(doc) })) });
      rewritten += 1;
    }
    expect(rewritten).to.be.greaterThan(2);
    const stream = streamId('acc_a', PARTITION, null);
    expect((fake.docs.get(fragmentId(stream, 1)) as EventPageDoc).packed).to.not.equal(undefined);
    const cache = new PageCache(1 << 20);
    for (const c of [undefined, cache, cache]) {
      expect(await readAfter(fake.asCollection(), after(null), c)).to.deep.equal(docs.slice(0, 18));
      expect(await readAfter(fake.asCollection(), after(null, { types: ['call.ended'] }), c)).to.deep.equal(docs.slice(0, 18).filter((d) => d.type === 'call.ended'));
    }
    // A writer (a fresh one: it reads the stream's state, the packed fragment too) appends deflated pages after them.
    await write(new PageWriter(fake.asCollection(), { pageEvents: 10, topicId: () => 'topic-1' }), docs.slice(18));
    expect((fake.docs.get(pageId(stream, 0)) as EventPageDoc).packed, 'a page is left as it is').to.not.equal(undefined);
    expect((fake.docs.get(pageId(stream, 2)) as EventPageDoc).deflated).to.not.equal(undefined);
    expect(await readAfter(fake.asCollection(), after(null), cache)).to.deep.equal(docs);
    expect(await readAfter(fake.asCollection(), after(null, { types: ['message.received'] }))).to.deep.equal(docs.filter((d) => d.type === 'message.received'));
  });

  it('with a cache: pages (never rewritten) and full directories are read once, the head, the newest directory and the fragments every time; answers equal the uncached ones', async () => {
    const fake = new FakePages();
    const writer = new PageWriter(fake.asCollection(), { pageEvents: 10, dirPages: 4, topicId: () => 'topic-1' });
    await write(writer, range(0, 94).map((o) => ev('acc_a', o)));
    const cache = new PageCache(1 << 20);
    for (const since of [null, 3, 9, 10, 37, 55, 80, 89, 93]) {
      for (const limit of [1, 7, 25]) {
        const plain = await readAfter(fake.asCollection(), after(since, { limit }));
        expect(await readAfter(fake.asCollection(), after(since, { limit }), cache), `since ${since} limit ${limit}`).to.deep.equal(plain);
        expect(await readAfter(fake.asCollection(), after(since, { limit }), cache), `again: since ${since} limit ${limit}`).to.deep.equal(plain);
      }
    }
    // Pages 0..9 (9: 90..94) are cached; directories 0 and 1 are full, 2 is the newest.
    fake.reads.length = 0;
    expect(offsets(await readAfter(fake.asCollection(), after(15, { limit: 10 }), cache))).to.deep.equal(range(16, 25));
    expect(fake.reads.map((f) => f._id)).to.deep.equal([headId(streamId('acc_a', PARTITION, null))]);
    fake.reads.length = 0;
    expect(offsets(await readAfter(fake.asCollection(), after(85, { limit: 100 }), cache))).to.deep.equal(range(86, 94));
    const stream = streamId('acc_a', PARTITION, null);
    // The stream's end: the newest directory, the first fragment (none), the head again (no compaction meanwhile).
    expect(fake.reads.map((f) => f._id)).to.deep.equal([headId(stream), dirId(stream, 2), fragmentId(stream, 1), headId(stream)]);
    // Fragments are added, then compacted into a new page: a read right after each sees every event.
    await write(writer, range(95, 99).map((o) => ev('acc_a', o)));
    expect(offsets(await readAfter(fake.asCollection(), after(85, { limit: 100 }), cache))).to.deep.equal(range(86, 99));
    // A fragment never changes: read again, it comes from the cache; the next one (the stream's end) from the store.
    fake.reads.length = 0;
    expect(offsets(await readAfter(fake.asCollection(), after(85, { limit: 100 }), cache))).to.deep.equal(range(86, 99));
    expect(fake.reads.map((f) => f._id)).to.deep.equal([headId(stream), dirId(stream, 2), fragmentId(stream, 2), headId(stream)]);
    await write(writer, range(100, 104).map((o) => ev('acc_a', o)));
    expect(offsets(await readAfter(fake.asCollection(), after(85, { limit: 100 }), cache))).to.deep.equal(range(86, 104));
    fake.reads.length = 0;
    expect(offsets(await readAfter(fake.asCollection(), after(85, { limit: 100 }), cache))).to.deep.equal(range(86, 104));
    expect(fake.reads.map((f) => f._id)).to.deep.equal([headId(stream), dirId(stream, 2), fragmentId(stream, 3), headId(stream)]);
    expect(cache.stats.hits).to.be.greaterThan(0);
  });

  it('with a cache: a stream written again under a new topic id (topic created again) is read from the store, not from the old copies', async () => {
    const fake = new FakePages();
    await write(new PageWriter(fake.asCollection(), { pageEvents: 4, topicId: () => 'topic-1' }), range(0, 9).map((o) => ev('acc_a', o)));
    const cache = new PageCache(1 << 20);
    expect(offsets(await readAfter(fake.asCollection(), after(null), cache))).to.deep.equal(range(0, 9));
    const reborn = range(0, 9).map((o) => ({ ...ev('acc_a', o), _id: `evt_new_life_${o}` }));
    await write(new PageWriter(fake.asCollection(), { pageEvents: 4, topicId: () => 'topic-2' }), reborn);
    expect((await readAfter(fake.asCollection(), after(null), cache)).map((d) => d._id)).to.deep.equal(reborn.map((d) => d._id));
  });

  it('backfills the streams of a store written before them: the same history as the materializer writes, and again adds nothing', async () => {
    const docs = range(0, 2499).map((o) => ev(o % 3 === 0 ? 'acc_a' : 'acc_b', o, o % 7 === 0 ? 'call.ended' : 'message.received'));
    // An id document (no body: its event is in its stream already) among them is skipped.
    const stored: StoredEventDoc[] = [...docs, { _id: 'evt_id_only', account_id: 'acc_a', partition: PARTITION, offset: 2500 }];
    const events = {
      find: (filter: { partition: number }) => ({
        sort: () => (async function* () {
          for (const d of stored) if (d.partition === filter.partition) yield d;
        })(),
      }),
    } as unknown as Collection<StoredEventDoc>;
    const fake = new FakePages();
    expect(await backfillPages(events, fake.asCollection(), PARTITION + 1)).to.equal(2500);
    const direct = new FakePages();
    const writer = new PageWriter(direct.asCollection());
    for (let i = 0; i < 2500; i += 500) await write(writer, docs.slice(i, i + 500));
    for (const accountId of ['acc_a', 'acc_b']) {
      for (const types of [undefined, ['call.ended'], ['message.received']] as (EventType[] | undefined)[]) {
        expect(await readAfter(fake.asCollection(), after(null, { accountId, types, limit: 5000 }))).to.deep.equal(await readAfter(direct.asCollection(), after(null, { accountId, types, limit: 5000 })));
      }
    }
    const once = structuredClone(streamDocs(fake));
    await backfillPages(events, fake.asCollection(), PARTITION + 1);
    expect(new Map(streamDocs(fake).sort())).to.deep.equal(new Map(once.sort()));
    expect(offsets(await readAfter(fake.asCollection(), after(null, { types: ['call.ended'], accountId: 'acc_b', limit: 500 })))).to.deep.equal(range(0, 2499).filter((o) => o % 3 !== 0 && o % 7 === 0));
  });
});
