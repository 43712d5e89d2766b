/**
 * At most N concurrent streams per account, counted across every API process
 * in MongoDB. Each slot is one document; a stream takes a free (or expired)
 * slot by inserting it, renews it on every heartbeat, and deletes it when it
 * ends. A process that dies leaves slots that expire on their own.
 *
 * Why one document per slot rather than an array of leases in one document:
 * inserts under a unique _id are atomic on MongoDB and on the FerretDB test
 * server alike, whereas FerretDB 1.x neither applies concurrent updates of one
 * document atomically nor supports $pull by condition or positional updates.
 */
import { randomBytes } from 'node:crypto';
import { MongoServerError, type Collection } from 'mongodb';
import { AppError } from '#shared/errors/index.js';
import type { StreamSlotDoc } from '#shared/mongo/documents.js';

export interface StreamLease {
  slotId: string;
  leaseId: string;
  accountId: string;
}

interface StreamSlotsOptions {
  max: number;
  /** How long a slot stays taken without renewal; well above the heartbeat interval. */
  ttlMs: number;
  holder: string;
  clock: () => Date;
  /** True where a conditional update is atomic (MongoDB); absent or false: an `_id` read, then an `_id` write (FerretDB). */
  atomicConditionalWrites?: () => Promise<boolean>;
}

const RETRY_AFTER_SECONDS = 5;

export class StreamSlots {
  constructor(
    private readonly slots: Collection<StreamSlotDoc>,
    private readonly opts: StreamSlotsOptions,
  ) {}

  /** Takes a slot or throws 429 too_many_streams. */
  async acquire(accountId: string): Promise<StreamLease> {
    const ids = Array.from({ length: this.opts.max }, (_, n) => `${accountId}:${n}`);
    const now = this.opts.clock();
    // One lookup per slot by _id, not one find with $in: FerretDB (the test server) answers only a
    // plain _id equality from its index, and scans the whole collection for anything else.
    const found = await Promise.all(ids.map((_id) => this.slots.findOne({ _id })));
    const taken = new Map(found.filter((d): d is StreamSlotDoc => d !== null).map((d) => [d._id, d]));
    const free = ids.filter((id) => !taken.has(id));
    const expired = ids.filter((id) => (taken.get(id)?.expires_at.getTime() ?? Infinity) <= now.getTime());
    const leaseId = randomBytes(9).toString('base64url');
    for (const slotId of [...free, ...expired]) {
      const stale = taken.get(slotId);
      // Only the exact expired lease is removed: a slot renewed or re-taken meanwhile is left alone.
      if (stale) await this.slots.deleteOne({ _id: slotId, lease_id: stale.lease_id, expires_at: { $lte: now } });
      if (await this.tryInsert(slotId, accountId, leaseId)) return { slotId, leaseId, accountId };
    }
    throw new AppError('too_many_streams', `At most ${this.opts.max} concurrent streams per account`, undefined, { 'Retry-After': String(RETRY_AFTER_SECONDS) });
  }

  /**
   * Extends the lease; false when it is gone (expired and taken over), and the
   * stream must end. On MongoDB one conditional update on `{_id, lease_id}`,
   * which is atomic and served by the `_id` index. On FerretDB that filter
   * reads the whole collection on every heartbeat of every stream and is not
   * atomic anyway, so there it is read and written by `_id` alone (see
   * acquire): the lease is checked by a read, then extended. Within that one
   * round trip the slot can only change hands if our lease had already run
   * out, and the new holder then keeps a lease extended by us, which is
   * harmless; we end at our next renewal.
   */
  async renew(lease: StreamLease): Promise<boolean> {
    if (await this.opts.atomicConditionalWrites?.().catch(() => false)) {
      const res = await this.slots.updateOne({ _id: lease.slotId, lease_id: lease.leaseId }, { $set: { expires_at: this.expiry() } });
      return res.matchedCount === 1;
    }
    if (!(await this.holds(lease))) return false;
    const res = await this.slots.updateOne({ _id: lease.slotId }, { $set: { expires_at: this.expiry() } });
    return res.matchedCount === 1;
  }

  /**
   * Frees the slot if this lease still holds it. The delete stays filtered by
   * the lease too (a scan on FerretDB, once per stream), so it can never
   * remove a slot another holder has taken over; the `_id` read first skips
   * it when there is nothing of ours to free.
   */
  async release(lease: StreamLease): Promise<void> {
    if (await this.holds(lease)) await this.slots.deleteOne({ _id: lease.slotId, lease_id: lease.leaseId });
  }

  private async holds(lease: StreamLease): Promise<boolean> {
    return (await this.slots.findOne({ _id: lease.slotId }, { projection: { lease_id: 1 } }))?.lease_id === lease.leaseId;
  }

  private async tryInsert(slotId: string, accountId: string, leaseId: string): Promise<boolean> {
    try {
      await this.slots.insertOne({ _id: slotId, account_id: accountId, lease_id: leaseId, holder: this.opts.holder, expires_at: this.expiry() });
      return true;
    } catch (err) {
      if (err instanceof MongoServerError && err.code === 11000) return false; // taken by someone else just now
      throw err;
    }
  }

  private expiry(): Date {
    return new Date(this.opts.clock().getTime() + this.opts.ttlMs);
  }
}
