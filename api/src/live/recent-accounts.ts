/**
 * What the fan-out has seen, per partition: each account's last offset among
 * the offsets it dispatched. A reader resuming from a cursor usually missed
 * nothing (a long-poll coming back right after its event, an SSE stream
 * reconnecting), and with this the feed knows that without asking MongoDB:
 * when the fan-out has seen every offset after the cursor and none of them
 * was the account's, the (cursor, P) read would come back empty.
 *
 * Bounded: at most `maxAccounts` per partition. Forgetting the account noted
 * longest ago (the lowest last offset, since offsets are noted in order)
 * raises the partition's `from` past that offset: below `from` the index no
 * longer vouches for anyone, and the feed reads MongoDB as before.
 */
interface PartitionIndex {
  /** Every offset >= from and below the fan-out position has been noted. */
  from: bigint;
  /** Account -> its last noted offset, least recently noted first. */
  last: Map<string, bigint>;
}

export class RecentAccounts {
  private readonly partitions = new Map<number, PartitionIndex>();

  constructor(private readonly maxAccounts: number) {}

  /** Starts (or restarts, after a gap) complete knowledge of `partition` at offset `from`. */
  reset(partition: number, from: bigint): void {
    this.partitions.set(partition, { from, last: new Map() });
  }

  /** The fan-out dispatched `offset` of `partition`, an event of `account`. Call in offset order. */
  note(partition: number, account: string, offset: bigint): void {
    const index = this.partitions.get(partition);
    if (!index) return;
    index.last.delete(account);
    index.last.set(account, offset);
    if (index.last.size > this.maxAccounts) {
      const [oldest, at] = index.last.entries().next().value as [string, bigint];
      index.last.delete(oldest);
      if (at + 1n > index.from) index.from = at + 1n;
    }
  }

  /**
   * True when every offset of `partition` after `after` that the fan-out has
   * dispatched was noted, and none was `account`'s. False means "not known",
   * never "there is something".
   */
  nothingAfter(partition: number, account: string, after: bigint): boolean {
    const index = this.partitions.get(partition);
    if (!index || after + 1n < index.from) return false;
    const last = index.last.get(account);
    return last === undefined || last <= after;
  }

  /** Accounts currently remembered, over all partitions (for tests and metrics). */
  size(): number {
    let n = 0;
    for (const index of this.partitions.values()) n += index.last.size;
    return n;
  }
}
