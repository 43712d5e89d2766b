/**
 * The retry scheduler reaches the store only by `_id`: on FerretDB every
 * other filter (a range, `$in`, state and due time) reads the whole
 * collection. The collections here are in-memory stand-ins that record every
 * filter they are sent (the real store is exercised by delivery/test).
 */
import { expect } from 'chai';
import { pino } from 'pino';
import { bucketOf, DUE_BUCKET_MS, DueWriteOrder } from '#shared/mongo/delivery-queue.js';
import type { DeliveryDoc } from '#shared/mongo/index.js';
import type { DeliveryCollections } from './deliveries.js';
import type { Job } from './jobs.js';
import { RetryScheduler } from './retry-scheduler.js';

type Doc = { _id: string } & Record<string, unknown>;

class RecordingCollection {
  readonly docs = new Map<string, Doc>();
  constructor(
    readonly collectionName: string,
    private readonly filters: { collection: string; op: string; filter: unknown }[],
  ) {}
  readonly dbName = 'unit';
  private seen(op: string, filter: unknown): void {
    this.filters.push({ collection: this.collectionName, op, filter });
  }
  private match(filter: Record<string, unknown>): Doc[] {
    return [...this.docs.values()].filter((d) => Object.entries(filter).every(([k, v]) => typeof v !== 'object' || v === null ? d[k] === v : true));
  }
  async findOne(filter: Record<string, unknown>): Promise<Doc | null> {
    this.seen('findOne', filter);
    return this.match(filter)[0] ?? null;
  }
  find(filter: Record<string, unknown>) {
    this.seen('find', filter);
    const rows = this.match(filter);
    const chain = { sort: () => chain, limit: () => chain, project: () => chain, toArray: async () => rows, [Symbol.asyncIterator]: async function* () { yield* rows; } };
    return chain;
  }
  async countDocuments(filter: Record<string, unknown>): Promise<number> {
    this.seen('countDocuments', filter);
    return this.match(filter).length;
  }
  async insertOne(doc: Doc): Promise<void> {
    if (this.docs.has(doc._id)) throw Object.assign(new Error('E11000 duplicate key'), { code: 11000 });
    this.docs.set(doc._id, structuredClone(doc));
  }
  /** Unordered: every new document goes in; duplicates are reported as the driver does (writeErrors). */
  async insertMany(docs: Doc[]): Promise<void> {
    const writeErrors: { index: number; code: number }[] = [];
    docs.forEach((d, index) => {
      if (this.docs.has(d._id)) writeErrors.push({ index, code: 11000 });
      else this.docs.set(d._id, structuredClone(d));
    });
    if (writeErrors.length > 0) throw Object.assign(new Error('E11000 duplicate key'), { code: 11000, writeErrors });
  }
  async updateOne(filter: Record<string, unknown>, update: { $set: Record<string, unknown> }, opts: { upsert?: boolean } = {}): Promise<{ matchedCount: number }> {
    this.seen('updateOne', filter);
    const [doc] = this.match(filter);
    if (doc) Object.assign(doc, update.$set);
    else if (opts.upsert) this.docs.set(filter._id as string, { ...(filter as Doc), ...update.$set });
    return { matchedCount: doc ? 1 : 0 };
  }
  async updateMany(filter: Record<string, unknown>): Promise<void> {
    this.seen('updateMany', filter);
  }
  async deleteOne(filter: Record<string, unknown>): Promise<void> {
    this.seen('deleteOne', filter);
  }
}

function pending(id: string, sub: string, over: Partial<DeliveryDoc>): DeliveryDoc {
  const at = new Date(0);
  return {
    _id: id, account_id: 'acc', subscription_id: sub, event_id: 'evt_' + id, event_type: 'call.started', body: '{}', state: 'pending', attempts: 1,
    next_attempt_at: at, claim_seq: 1, lease_owner: null, lease_until: null, last_status: 500, last_outcome: 'http_5xx', created_at: at, updated_at: at, ...over,
  };
}

type Filters = { collection: string; op: string; filter: unknown }[];

/** An in-memory store; `retryDue` shared when given (two schedulers over one store). */
function store(filters: Filters = [], shared?: RecordingCollection) {
  const coll = (name: string) => new RecordingCollection(name, filters);
  return { deliveries: coll('deliveries'), attempts: coll('attempts'), webhooks: coll('webhooks'), webhookStatus: coll('webhook_status'), claims: coll('claims'), retryDue: shared ?? coll(`due_${Date.now()}_${Math.random()}`), dueWrites: new DueWriteOrder() };
}

/** Every entry written into a bucket other than `b` (slot documents only). */
function writtenOutside(c: ReturnType<typeof store>, b: number): { d: string; s: string; t: number }[] {
  return [...c.retryDue.docs.values()].filter((d) => d._id.startsWith('due:') && Array.isArray(d.entries) && d.b !== b).flatMap((d) => d.entries as { d: string; s: string; t: number }[]);
}

describe('retry scheduler', () => {
  it('puts back the entries of deliveries this process holds (at their lease end, a second ahead at least): none is dropped', async () => {
    const c = store();
    const now = Date.now();
    const b = bucketOf(now) - 2;
    c.retryDue.docs.set('cursor', { _id: 'cursor', next: b, at: new Date() });
    const due = new Date(b * DUE_BUCKET_MS);
    const leaseEnd = now + 20_000;
    // A fresh delivery whose failure was just stored (no lease; its record is still being
    // written here), and a stored one this process renewed (its lease check is this entry).
    for (const d of [
      pending('dlv_fresh', 'wh_a', { next_attempt_at: due }),
      pending('dlv_renewed', 'wh_a', { next_attempt_at: due, lease_owner: 'me', lease_until: new Date(leaseEnd) }),
      pending('dlv_finished', 'wh_a', { state: 'succeeded', next_attempt_at: null }),
    ]) c.deliveries.docs.set(d._id, d as unknown as Doc);
    c.retryDue.docs.set(`due:${b}:0`, { _id: `due:${b}:0`, b, at: new Date(), entries: ['dlv_fresh', 'dlv_renewed', 'dlv_finished'].map((d) => ({ d, s: 'wh_a', t: due.getTime() })) });
    const enqueued: Job[] = [];
    const dispatcher = { room: 10, holds: () => true, roomFor: () => 10, paceOf: () => 10, enqueue: (j: Job) => (enqueued.push(j), 'queued' as const) };
    const scheduler = new RetryScheduler({ log: pino({ level: 'silent' }), collections: c as unknown as DeliveryCollections, dispatcher, owner: 'me', leaseMs: 30_000, intervalMs: 100, clock: () => new Date(now) });
    expect(await scheduler.tick()).to.equal(0);
    expect(enqueued).to.have.length(0);
    const written = writtenOutside(c, b).sort((x, y) => x.d.localeCompare(y.d));
    expect(written.map((e) => [e.d, e.t])).to.deep.equal([
      ['dlv_fresh', now + 1000],
      ['dlv_renewed', leaseEnd],
    ]);
  });

  it('two schedulers reading one bucket write each deferred delivery once each (copies merged, never multiplied), spread at its subscription\'s pace', async () => {
    const c = store();
    const now = Date.now();
    const b = bucketOf(now) - 2;
    c.retryDue.docs.set('cursor', { _id: 'cursor', next: b, at: new Date() });
    const due = new Date(b * DUE_BUCKET_MS);
    // A burst of a rate-limited subscription with no room left in either process, each
    // delivery bucketed twice (a writer's retry, a release): 100 distinct deliveries.
    const ids = Array.from({ length: 100 }, (_, i) => `dlv_burst_${i}`);
    for (const id of ids) c.deliveries.docs.set(id, pending(id, 'wh_slow', { next_attempt_at: due }) as unknown as Doc);
    const entries = [...ids, ...ids].map((d) => ({ d, s: 'wh_slow', t: due.getTime() }));
    c.retryDue.docs.set(`due:${b}:0`, { _id: `due:${b}:0`, b, at: new Date(), entries: entries.slice(0, 100) });
    c.retryDue.docs.set(`due:${b}:1`, { _id: `due:${b}:1`, b, at: new Date(), entries: entries.slice(100) });
    const pace = 5;
    const schedulerOf = (owner: string) =>
      new RetryScheduler({
        log: pino({ level: 'silent' }),
        // Each scheduler is a process of its own: its own write order into the due store.
        collections: { ...c, dueWrites: new DueWriteOrder() } as unknown as DeliveryCollections,
        dispatcher: { room: 500, holds: () => false, roomFor: (s: string) => (s === 'wh_slow' ? 0 : 10), paceOf: () => pace, enqueue: () => 'queued' as const },
        owner,
        leaseMs: 30_000,
        intervalMs: 100,
        clock: () => new Date(now),
      });
    await Promise.all([schedulerOf('p1').tick(), schedulerOf('p2').tick()]);
    const written = writtenOutside(c, b);
    expect(written.length, 'one entry per distinct delivery and process, not one per copy').to.equal(200);
    expect(new Set(written.map((e) => e.d)).size).to.equal(100);
    // Spread: at most `pace` per second from now + 1 s on (not all 100 a second ahead), per process.
    const perSecond = new Map<number, number>();
    for (const e of written) perSecond.set(e.t, (perSecond.get(e.t) ?? 0) + 1);
    expect(Math.max(...perSecond.values())).to.equal(2 * pace);
    expect(Math.min(...perSecond.keys())).to.equal(now + 1000);
    expect(Math.max(...perSecond.keys())).to.equal(now + 1000 + (100 / pace - 1) * 1000);
  });

  it('hands out a delivery bucketed twice in one bucket once (one lease check, one claim)', async () => {
    const c = store();
    const now = Date.now();
    const b = bucketOf(now) - 2;
    c.retryDue.docs.set('cursor', { _id: 'cursor', next: b, at: new Date() });
    const due = new Date(b * DUE_BUCKET_MS);
    c.deliveries.docs.set('dlv_twice', pending('dlv_twice', 'wh_a', { next_attempt_at: due }) as unknown as Doc);
    c.retryDue.docs.set(`due:${b}:0`, { _id: `due:${b}:0`, b, at: new Date(), entries: [{ d: 'dlv_twice', s: 'wh_a', t: due.getTime() }] });
    c.retryDue.docs.set(`due:${b}:1`, { _id: `due:${b}:1`, b, at: new Date(), entries: [{ d: 'dlv_twice', s: 'wh_a', t: due.getTime() }] });
    const enqueued: Job[] = [];
    const dispatcher = { room: 10, holds: () => false, roomFor: () => 10, paceOf: () => 10, enqueue: (j: Job) => (enqueued.push(j), 'queued' as const) };
    const scheduler = new RetryScheduler({ log: pino({ level: 'silent' }), collections: c as unknown as DeliveryCollections, dispatcher, owner: 'me', leaseMs: 30_000, intervalMs: 100, clock: () => new Date(now) });
    expect(await scheduler.tick()).to.equal(1);
    expect(enqueued.map((j) => j.delivery._id)).to.deep.equal(['dlv_twice']);
    expect(writtenOutside(c, b).map((e) => [e.d, e.t])).to.deep.equal([['dlv_twice', now + 30_000]]);
  });

  it('finds and claims due retries through _id-equality reads and inserts only', async () => {
    const filters: { collection: string; op: string; filter: unknown }[] = [];
    const coll = (name: string) => new RecordingCollection(name, filters);
    const c = { deliveries: coll('deliveries'), attempts: coll('attempts'), webhooks: coll('webhooks'), webhookStatus: coll('webhook_status'), claims: coll('claims'), retryDue: coll(`due_${Date.now()}`), dueWrites: new DueWriteOrder() };
    const now = Date.now();
    const b = bucketOf(now) - 3;
    // A scheduler ran before: the cursor is stored, a few buckets back.
    c.retryDue.docs.set('cursor', { _id: 'cursor', next: b - 2, at: new Date() });
    const due = new Date(b * DUE_BUCKET_MS);
    for (const d of [
      pending('dlv_due', 'wh_a', { next_attempt_at: due }),
      pending('dlv_done', 'wh_a', { state: 'succeeded', next_attempt_at: null }),
      pending('dlv_held', 'wh_b', { next_attempt_at: due, lease_owner: 'other', lease_until: new Date(now + 60_000) }),
      pending('dlv_later', 'wh_b', { next_attempt_at: new Date(now + 600_000) }),
    ]) c.deliveries.docs.set(d._id, d as unknown as Doc);
    const t = due.getTime();
    c.retryDue.docs.set(`due:${b}:0`, { _id: `due:${b}:0`, b, at: new Date(), entries: ['dlv_due', 'dlv_done', 'dlv_held', 'dlv_later'].map((d) => ({ d, s: d === 'dlv_due' || d === 'dlv_done' ? 'wh_a' : 'wh_b', t })) });

    const enqueued: Job[] = [];
    const dispatcher = { room: 10, holds: () => false, roomFor: () => 10, paceOf: () => 10, enqueue: (j: Job) => (enqueued.push(j), 'queued' as const) };
    const scheduler = new RetryScheduler({ log: pino({ level: 'silent' }), collections: c as unknown as DeliveryCollections, dispatcher, owner: 'me', leaseMs: 30_000, intervalMs: 100, clock: () => new Date(now) });
    const claimed = await scheduler.tick();
    for (const f of filters) {
      expect(f.filter, `${f.collection}.${f.op}`).to.be.an('object');
      expect(Object.keys(f.filter as object), `${f.collection}.${f.op} filters on _id alone`).to.deep.equal(['_id']);
      expect(typeof (f.filter as { _id: unknown })._id, `${f.collection}.${f.op} is an _id equality`).to.equal('string');
    }
    expect(filters.length).to.be.greaterThan(5);
    expect(claimed).to.equal(1);

    expect(enqueued.map((j) => j.delivery._id)).to.deep.equal(['dlv_due']);
    expect(c.claims.docs.has('dlv_due:2'), 'claimed with the next claim number').to.equal(true);
    // Every bucket up to the current one was read and sealed.
    expect(c.retryDue.docs.get(`due:${b}:1`)).to.include({ sealed: true });
    // The held one comes back at its lease's end; the claimed one gets its lease check.
    const written = [...c.retryDue.docs.values()].filter((d) => d._id.startsWith('due:') && Array.isArray(d.entries) && d.b !== b).flatMap((d) => d.entries as { d: string; t: number }[]);
    expect(written.map((e) => e.d).sort()).to.deep.equal(['dlv_due', 'dlv_held']);
  });
});
