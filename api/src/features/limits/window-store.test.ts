import { expect } from 'chai';
import { INDEXES, RATE_WINDOW_GRACE_MS, type Collections } from '#shared/mongo/index.js';
import { sweepExpiredWindows } from './window-store.js';

describe('TTL parity: a TTL index (MongoDB) removes what the sweeper (FerretDB) removes, when it does', () => {
  it('keeps an ended rate-limit window as long on both: the index waits the sweeper\'s grace', async () => {
    let filter: { expire?: { $lt?: Date } } = {};
    const fake = { deleteMany: async (f: typeof filter) => ((filter = f), { deletedCount: 0, acknowledged: true }) };
    const now = new Date('2030-01-01T00:00:00Z');
    await sweepExpiredWindows(fake as never, now);
    const sweptBefore = now.getTime() - filter.expire!.$lt!.getTime();
    const ttl = INDEXES.rateLimits.find((i) => i.expireAfterSeconds !== undefined)!;
    expect(ttl.key).to.deep.equal({ expire: 1 });
    expect(ttl.expireAfterSeconds! * 1000).to.equal(sweptBefore);
    expect(sweptBefore).to.equal(RATE_WINDOW_GRACE_MS);
  });

  it('every other TTL index removes at expires_at itself, as its readers and sweepers compare expires_at with now', () => {
    const ttls = Object.entries(INDEXES).flatMap(([c, specs]) => specs.filter((i) => i.expireAfterSeconds !== undefined).map((i) => [c as keyof Collections, i] as const));
    expect(ttls.map(([c]) => c).sort()).to.deep.equal(['ingestKeys', 'rateLimits', 'webhookOpKeys']);
    for (const [c, i] of ttls) if (c !== 'rateLimits') expect([i.key, i.expireAfterSeconds], c).to.deep.equal([{ expires_at: 1 }, 0]);
  });
});
