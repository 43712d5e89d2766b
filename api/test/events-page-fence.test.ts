import { expect } from 'chai';
import { encodeCursor } from '#shared/cursor.js';
import type { EventType } from '#shared/eventlog/types.js';
import type { EventDoc } from '#shared/mongo/documents.js';
import { createMongo, type Mongo } from '#shared/mongo/index.js';
import { ownDatabase } from '#test-support/env.js';
import { FencedError, PageWriter, type PagesCollection } from '../src/event-store/pages.js';
import { readAfter } from '../src/event-store/store.js';
import { testApiConfig } from './support/api.js';
import { fakeAccountId } from './support/events.js';

/**
 * Two writers of one partition against the real FerretDB: the old one stalls
 * in the middle of a chunk (after every check it makes before a write), a
 * newer one claims the partition and writes further; the old one's page
 * write, sent late, must be refused by the store.
 */
describe('event store: a writer that lost its partition mid-chunk cannot replace a newer page (pages.ts fence)', function () {
  this.timeout(60_000);
  const PARTITION = 2;
  let mongo: Mongo;
  let pages: PagesCollection;

  before(() => {
    mongo = createMongo(testApiConfig({ MONGO_DB: ownDatabase('fence') }));
    pages = mongo.collections.eventPages;
  });

  after(async () => {
    await mongo.db.dropDatabase().catch(() => undefined);
    await mongo.close();
  });

  const ev = (accountId: string, offset: number, type: EventType = 'message.received'): EventDoc => ({
    _id: `ev_${accountId}_${offset}`,
    account_id: accountId,
    type,
    data: { offset },
    created_at: new Date(0),
    partition: PARTITION,
    offset,
    cursor: encodeCursor({ partition: PARTITION, offset: BigInt(offset) }),
  });
  const run = (accountId: string, from: number, to: number): EventDoc[] => Array.from({ length: to - from + 1 }, (_, i) => ev(accountId, from + i));
  const write = (w: PageWriter, docs: EventDoc[]): Promise<boolean> => w.write(PARTITION, docs, BigInt(docs[0]!.offset), BigInt(docs.at(-1)!.offset));
  const history = async (accountId: string, types: EventType[] | null = null): Promise<number[]> =>
    (await readAfter(pages, { accountId, partition: PARTITION, since: null, through: 1_000_000n, types, limit: 500 })).map((d) => d.offset);
  const range = (from: number, to: number): number[] => Array.from({ length: to - from + 1 }, (_, i) => from + i);

  it('refuses the stale writer\'s late page write: the newer writer\'s events stay in history', async () => {
    const account = fakeAccountId();
    let stall: Promise<void> | null = null;
    let stalled!: () => void;
    const reached = new Promise<void>((resolve) => (stalled = resolve));
    let release!: () => void;
    const old = new PageWriter(pages, {
      pageEvents: 10,
      topicId: () => 'topic-fence',
      beforeWrite: async () => {
        if (!stall) return;
        stalled();
        await stall;
      },
    });
    // The old owner writes offsets 0..4, then stalls before the first page write of its next chunk (5..7).
    expect(await write(old, run(account, 0, 4))).to.equal(true);
    stall = new Promise<void>((resolve) => (release = resolve));
    const late = write(old, run(account, 5, 7));
    late.catch(() => undefined);
    await reached;

    // Meanwhile the partition went to a new owner, which resumes from the committed offset (5) and fills page 0 and more.
    const owner = new PageWriter(pages, { pageEvents: 10, topicId: () => 'topic-fence' });
    expect(await write(owner, run(account, 5, 14))).to.equal(true);
    expect(await history(account)).to.deep.equal(range(0, 14));

    // The old writer wakes: its page 0 (offsets 0..7) would replace the new owner's (0..9).
    release();
    let refused: unknown = null;
    await late.catch((err: unknown) => (refused = err));
    expect(await history(account)).to.deep.equal(range(0, 14));
    expect(await history(account, ['message.received'])).to.deep.equal(range(0, 14));
    expect(refused, 'the stale write is refused').to.be.instanceOf(FencedError);

    // The new owner writes on; the old one, given the partition again later, claims again and continues from the store.
    expect(await write(owner, run(account, 15, 16))).to.equal(true);
    expect(await write(old, run(account, 17, 18))).to.equal(true);
    expect(await history(account)).to.deep.equal(range(0, 18));
    // Now the old one holds the newest claim: the other's chunk that follows its own is refused in turn.
    let second: unknown = null;
    await write(owner, run(account, 17, 18)).catch((err: unknown) => (second = err));
    expect(second).to.be.instanceOf(FencedError);
    expect(await history(account)).to.deep.equal(range(0, 18));
  });
});
