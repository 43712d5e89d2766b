/**
 * Keeps the leases of store jobs alive from their attempt until their record
 * is written: a record lagging behind a slow store must not let the lease run
 * out while the attempt is already sent (another claimer would send it
 * again). The copy held here is updated in place, so the record is fenced on
 * the latest claim.
 */
import type { Logger } from '#shared/log.js';
import type { DeliveryDoc } from '#shared/mongo/index.js';
import { bucketLeaseChecks, claim, releaseLeases, type DeliveryCollections } from './deliveries.js';

interface LeaseKeeperDeps {
  log: Logger;
  collections: DeliveryCollections;
  owner: string;
  leaseMs: number;
  clock: () => Date;
}

export class LeaseKeeper {
  /** Deliveries claimed here whose attempt or record is pending, as held now. */
  private readonly active = new Map<string, DeliveryDoc>();
  private readonly extending = new Set<string>();
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly deps: LeaseKeeperDeps) {}

  /** Keeps `delivery`'s lease until `let go`; returns the copy updated in place. */
  keep(delivery: DeliveryDoc): DeliveryDoc {
    const held: DeliveryDoc = { ...delivery };
    this.active.set(held._id, held);
    if (!this.timer) {
      this.timer = setInterval(() => this.extendLeases(), Math.max(250, Math.floor(this.deps.leaseMs / 4)));
      this.timer.unref();
    }
    return held;
  }

  letGo(id: string): void {
    this.active.delete(id);
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /**
   * Extends the lease of every delivery whose attempt or record is pending
   * here and whose lease has less than half its length left. An extension is
   * the next claim (a unique insert), so it either wins against any other
   * claimer or tells us the lease is lost; the record is then fenced out.
   */
  private extendLeases(): void {
    const { deps } = this;
    if (this.active.size === 0) {
      this.stop();
      return;
    }
    const now = deps.clock();
    const due = [...this.active.values()].filter((held) => !this.extending.has(held._id) && held.lease_until && held.lease_until.getTime() - now.getTime() <= deps.leaseMs / 2);
    if (due.length === 0) return;
    for (const held of due) this.extending.add(held._id);
    // Their lease checks at the new ends first (one slot for all, not one per delivery), then the claims.
    bucketLeaseChecks(deps.collections, due, now, deps.leaseMs)
      .then(() => Promise.all(due.map((held) => this.extendOne(held, now))))
      .catch((err: unknown) => deps.log.warn({ err, deliveries: due.length }, 'could not extend delivery leases; will try again'))
      .finally(() => {
        for (const held of due) this.extending.delete(held._id);
      });
  }

  private async extendOne(held: DeliveryDoc, now: Date): Promise<void> {
    const { deps } = this;
    try {
      const renewed = await claim(deps.collections, held, deps.owner, now, deps.leaseMs);
      if (renewed) {
        Object.assign(held, { claim_seq: renewed.claim_seq, lease_owner: renewed.lease_owner, lease_until: renewed.lease_until });
        // The record finished while we extended: give the lease back so a due retry is not held up.
        if (!this.active.has(held._id)) await releaseLeases(deps.collections, [held._id], deps.owner, deps.clock());
      } else {
        held.lease_until = null; // lost: the record will be fenced out; stop trying
        deps.log.warn({ delivery: held._id }, 'lost the lease of a delivery whose attempt is pending; its record will not overwrite the new holder');
      }
    } catch (err) {
      deps.log.warn({ err, delivery: held._id }, 'could not extend a delivery lease; will try again');
    }
  }
}
