import type { DeliveryProgressDoc } from '#shared/mongo/index.js';

/**
 * Which offset of each partition may be committed: the lowest offset whose
 * deliveries are not all finished (a delivery is finished once it succeeded
 * and its attempt is recorded, or once it is handed to the retry store), or
 * one past the last message seen when everything is finished. A slow
 * attempt so holds back the commit of its partition, never the sending of
 * the partition's other deliveries; a crash re-reads the log from the
 * committed offset and sends again what was not finished (at-least-once).
 */
export class PartitionProgress {
  /** Unfinished deliveries per offset (delivery id -> copies under way), for offsets with any. */
  private readonly pending = new Map<bigint, Map<string, number>>();
  /** Offsets with unfinished deliveries where some delivery already finished. */
  private readonly partly = new Set<bigint>();
  /** Offsets with unfinished deliveries, in the order seen (increasing). */
  private order: bigint[] = [];
  private head = 0;
  private next: bigint | null = null;
  /** The first offset seen in this generation. */
  private first: bigint | null = null;
  private count = 0;
  /** What a previous owner of the partition recorded as finished above the committed offset (read once per generation). */
  resume: Resume | null = null;

  /** `onFinish`: told after each delivery finished (the tracker writes the progress document then). */
  constructor(private readonly onFinish: () => void = () => undefined) {}

  /** Every message of the partition, in order, whether or not it has deliveries. */
  seen(offset: string): void {
    const at = BigInt(offset);
    this.first ??= at;
    if (this.next === null || at + 1n > this.next) this.next = at + 1n;
  }

  /** One more delivery (`id`) of the message at `offset` is under way. */
  add(offset: string, id: string): void {
    const at = BigInt(offset);
    this.first ??= at;
    let ids = this.pending.get(at);
    if (ids === undefined) {
      ids = new Map();
      this.pending.set(at, ids);
      this.order.push(at);
    }
    ids.set(id, (ids.get(id) ?? 0) + 1);
    this.count++;
  }

  finish(offset: string, id: string): void {
    const at = BigInt(offset);
    const ids = this.pending.get(at);
    const n = ids?.get(id);
    if (ids === undefined || n === undefined) return;
    if (n <= 1) ids.delete(id);
    else ids.set(id, n - 1);
    if (ids.size === 0) {
      this.pending.delete(at);
      this.partly.delete(at);
    } else this.partly.add(at);
    this.count--;
    this.onFinish();
  }

  /** Deliveries not finished. */
  get unfinished(): number {
    return this.count;
  }

  /** The offset to commit (the next message to read after a restart), or null before any message. */
  watermark(): string | null {
    while (this.head < this.order.length && !this.pending.has(this.order[this.head] as bigint)) this.head++;
    if (this.head > 1024 && this.head * 2 > this.order.length) {
      this.order = this.order.slice(this.head);
      this.head = 0;
    }
    const low = this.order[this.head];
    if (low !== undefined) return low.toString();
    return this.next === null ? null : this.next.toString();
  }

  /**
   * What is finished above `committed` (the last offset committed in this
   * generation, null before the first commit): every message in [from, to)
   * has all its deliveries finished but the `open` ones. At most `maxIds`
   * open ids are listed (`to` stops before the offset that would exceed
   * it). Null when nothing above the commit is finished (no document needed).
   */
  snapshot(committed: string | null, maxIds = MAX_OPEN_IDS): { from: string; to: string; open: { offset: string; ids: string[] }[] } | null {
    this.watermark(); // moves `head` past finished offsets
    if (this.next === null || this.first === null) return null;
    let from = committed === null ? this.first : BigInt(committed);
    if (from < this.first) from = this.first;
    let to = this.next;
    const open: { offset: string; ids: string[] }[] = [];
    let listed = 0;
    // One past the highest offset that says anything (some delivery finished there, or all of
    // them): above it everything is still open, and the log says as much.
    let useful = from;
    let prev = from - 1n;
    for (let i = this.head; i < this.order.length; i++) {
      const at = this.order[i] as bigint;
      const ids = this.pending.get(at);
      if (!ids || at < from) continue;
      if (listed + ids.size > maxIds) {
        to = at;
        break;
      }
      if (at > prev + 1n) useful = at; // finished offsets below it
      if (this.partly.has(at)) useful = at + 1n;
      prev = at;
      open.push({ offset: at.toString(), ids: [...ids.keys()] });
      listed += ids.size;
    }
    if (to > prev + 1n) useful = to; // finished offsets above the last open one
    if (useful < to) to = useful;
    while (open.length > 0 && BigInt((open[open.length - 1] as { offset: string }).offset) >= to) open.pop();
    // Nothing finished above the commit: the commit says it all.
    if (to <= from) return null;
    return { from: from.toString(), to: to.toString(), open };
  }
}

/** Open delivery ids listed in one progress document at most (beyond them, the log is simply read again). */
const MAX_OPEN_IDS = 4000;

/**
 * A previous owner's progress document, as this generation reads the
 * partition: a delivery it lists as finished is not sent again.
 */
export class Resume {
  private readonly from: bigint;
  private readonly to: bigint;
  private readonly open = new Map<bigint, Set<string>>();

  constructor(doc: Pick<DeliveryProgressDoc, 'from' | 'to' | 'open'>) {
    this.from = BigInt(doc.from);
    this.to = BigInt(doc.to);
    for (const o of doc.open) this.open.set(BigInt(o.offset), new Set(o.ids));
  }

  /**
   * Usable when this generation starts reading at or above where the
   * document starts: below it, the group's offsets were reset (a replay),
   * and everything is sent again as asked.
   */
  appliesFrom(firstOffset: string): boolean {
    return BigInt(firstOffset) >= this.from && BigInt(firstOffset) < this.to;
  }

  /** True when the delivery `id` of the message at `offset` was finished by the previous owner. */
  finished(offset: string, id: string): boolean {
    const at = BigInt(offset);
    if (at < this.from || at >= this.to) return false;
    const open = this.open.get(at);
    return open === undefined || !open.has(id);
  }
}
