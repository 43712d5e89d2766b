/**
 * The per-process API key cache: key hash -> account, so an authenticated
 * request resolves a known key without a store operation. It stays exact:
 * a rotated or revoked key is refused by every live process by the time the
 * rotating request returns (docs/security.md, "API key cache").
 *
 * - Every `syncMs` the cache reads the key epoch (one `_id` lookup) and
 *   writes its process document (one `_id` upsert: the epoch applied, and
 *   the wall-clock time the sync began). A changed epoch clears the cache
 *   before the new epoch is acknowledged.
 * - The cache answers only within `leaseMs` of the start of its last
 *   successful sync (this process's monotonic clock). A process that cannot
 *   reach MongoDB (partitioned, stalled) stops trusting its cache within
 *   that bound, and then resolves every key from the store (which answers
 *   503 while it is unreachable).
 * - A rotation or revocation, once its key documents are written, bumps the
 *   epoch and waits until every process document written within 2 x leaseMs
 *   shows the new epoch, or until leaseMs has passed since the bump (by then
 *   any process that did not see the bump has a lapsed lease). Processes are
 *   told apart by instance id; the 2 x leaseMs filter assumes clocks agree
 *   within leaseMs.
 * - A lookup that began before a clear does not fill the cache (a generation
 *   check), so a read racing a rotation cannot put the old key back.
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Collection, UpdateFilter } from 'mongodb';
import type { ApiPodDoc, KeyEpochDoc } from '#shared/mongo/index.js';
import type { Logger } from '#shared/log.js';

export const KEY_EPOCH_ID = 'api_keys';

interface KeyCacheOptions {
  instanceId: string;
  epoch: Collection<KeyEpochDoc>;
  pods: Collection<ApiPodDoc>;
  log: Logger;
  /** How often the epoch is read and this process's document written; 0 turns the cache off. */
  syncMs: number;
  /** How long after the start of its last successful sync the cache may answer. */
  leaseMs: number;
  /** Most keys kept (the oldest filled goes first). */
  maxEntries: number;
  /** Monotonic milliseconds (tests may move time). */
  now?: () => number;
  wall?: () => Date;
}

interface KeyCacheStats {
  hits: number;
  misses: number;
  clears: number;
  syncs: number;
  syncFailures: number;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export class KeyCache {
  private readonly entries = new Map<string, string>();
  /** Bumped at every clear: a lookup that began in an older generation does not fill. */
  private generation = 0;
  /** The epoch this process has applied (null before the first sync). */
  private applied: number | null = null;
  private leaseUntil = -Infinity;
  /** A key change is in flight (its mark seen at the last sync): answer from the store only. */
  private blocked = false;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private stopped = false;
  private failing = false;
  /** Test hook: while true, syncs do not run (a process cut off from MongoDB). */
  held = false;
  readonly stats: KeyCacheStats = { hits: 0, misses: 0, clears: 0, syncs: 0, syncFailures: 0 };
  private readonly now: () => number;
  private readonly wall: () => Date;

  constructor(private readonly opts: KeyCacheOptions) {
    this.now = opts.now ?? (() => performance.now());
    this.wall = opts.wall ?? (() => new Date());
  }

  get enabled(): boolean {
    return this.opts.syncMs > 0 && this.opts.maxEntries > 0;
  }

  /** Starts the syncs (the cache answers from the first successful one). */
  start(): void {
    if (!this.enabled || this.timer || this.stopped) return;
    const loop = (): void => {
      this.running = this.sync().finally(() => {
        this.running = null;
        if (!this.stopped) {
          this.timer = setTimeout(loop, this.opts.syncMs);
          this.timer.unref();
        }
      });
    };
    loop();
  }

  /** Stops syncing and removes this process's document (a process that left is no longer waited for). */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
    this.clear();
    this.leaseUntil = -Infinity;
    if (!this.enabled) return;
    await this.opts.pods.deleteOne({ _id: this.opts.instanceId }).catch((err: unknown) => this.opts.log.debug({ err }, 'could not remove this process from api_pods'));
  }

  /** The cache may answer: a sync succeeded within the lease. */
  usable(): boolean {
    return this.enabled && !this.blocked && this.now() < this.leaseUntil;
  }

  /** The account of a key hash, when cached and the lease holds. */
  get(hash: string): string | undefined {
    if (!this.usable()) return undefined;
    const account = this.entries.get(hash);
    if (account === undefined) this.stats.misses += 1;
    else this.stats.hits += 1;
    return account;
  }

  /** Taken before a store lookup; pass to fill() with its result. */
  fillToken(): number {
    return this.generation;
  }

  /** Remembers a key the store just confirmed, unless the cache was cleared since the lookup began. */
  fill(hash: string, accountId: string, token: number): void {
    if (!this.usable() || token !== this.generation) return;
    if (this.entries.size >= this.opts.maxEntries && !this.entries.has(hash)) {
      const oldest = this.entries.keys().next();
      if (!oldest.done) this.entries.delete(oldest.value);
    }
    this.entries.set(hash, accountId);
  }

  get size(): number {
    return this.entries.size;
  }

  private clear(): void {
    this.generation += 1;
    this.stats.clears += 1;
    this.entries.clear();
  }

  /** One sync: read the epoch, clear on a change, then acknowledge it; renews the lease on success. */
  async sync(): Promise<void> {
    if (this.held) return;
    const started = this.now();
    const at = this.wall();
    try {
      const doc = await this.opts.epoch.findOne({ _id: KEY_EPOCH_ID });
      const seq = doc?.seq ?? 0;
      const wallNow = this.wall().getTime();
      const blocked = Object.values(doc?.pending ?? {}).some((until) => until.getTime() > wallNow);
      if (seq !== this.applied || blocked || this.blocked) {
        this.clear();
        this.applied = seq;
      }
      this.blocked = blocked;
      await this.opts.pods.updateOne({ _id: this.opts.instanceId }, { $set: { applied: seq, at } }, { upsert: true });
      if (this.held) return;
      this.leaseUntil = started + this.opts.leaseMs;
      this.stats.syncs += 1;
      if (this.failing) this.opts.log.info('key cache syncs with MongoDB again');
      this.failing = false;
    } catch (err) {
      this.stats.syncFailures += 1;
      // Once per outage, not every sync.
      if (!this.failing) this.opts.log.warn({ err }, 'key cache could not sync with MongoDB; it stops answering when its lease lapses');
      this.failing = true;
    }
  }

  /**
   * Before a rotation or revocation writes the key documents: marks a change
   * in flight on the epoch document. A process that syncs while a change is
   * in flight clears its cache and answers from the store only, so a change
   * whose final epoch bump never happens (MongoDB lost, process died) still
   * ends the old key everywhere; the mark lapses after `pendingMs`.
   */
  async beginChange(pendingMs = 60_000): Promise<KeyChange> {
    const id = randomBytes(6).toString('hex');
    await this.opts.epoch.updateOne({ _id: KEY_EPOCH_ID }, { $set: { [`pending.${id}`]: new Date(this.wall().getTime() + pendingMs) } }, { upsert: true });
    return { id, markedAt: this.now() };
  }

  /**
   * After the key documents were written: bumps the epoch (ending the
   * change's mark; null: a change that raced a first key, never marked), clears this process's cache, and waits until every live
   * process applied the new epoch, or until a process that did not has no
   * lease left. When the bump cannot be written, waits until every process
   * saw the mark or lost its lease, then throws (the caller answers 503).
   */
  async publishChange(change: KeyChange | null): Promise<{ epoch: number; waitedFor: string[] }> {
    this.clear();
    let epoch: number;
    try {
      const update: UpdateFilter<KeyEpochDoc> = change ? { $inc: { seq: 1 }, $unset: { [`pending.${change.id}`]: '' as const } } : { $inc: { seq: 1 } };
      const bumped = await this.opts.epoch.findOneAndUpdate({ _id: KEY_EPOCH_ID }, update, { upsert: true, returnDocument: 'after' });
      epoch = bumped?.seq ?? 0;
    } catch (err) {
      // Every process that synced since the mark stopped answering from its cache; the others' leases lapse by markedAt + leaseMs.
      if (change) await sleep(Math.max(0, change.markedAt + this.opts.leaseMs - this.now()));
      throw err;
    }
    const bumpedAt = this.now();
    this.clear();
    if (!this.enabled) return { epoch, waitedFor: [] };
    const deadline = bumpedAt + this.opts.leaseMs;
    const poll = Math.max(5, Math.min(50, Math.floor(this.opts.syncMs / 4)));
    let pending: string[] = [];
    while (this.now() < deadline) {
      try {
        const liveSince = this.wall().getTime() - 2 * this.opts.leaseMs;
        const pods = await this.opts.pods.find({}).toArray();
        pending = pods.filter((p) => p._id !== this.opts.instanceId && p.at.getTime() >= liveSince && p.applied < epoch).map((p) => p._id);
        if (pending.length === 0) return { epoch, waitedFor: [] };
      } catch (err) {
        this.opts.log.warn({ err }, 'key change: could not read api_pods; waiting out the lease instead');
      }
      await sleep(Math.min(poll, Math.max(1, deadline - this.now())));
    }
    this.opts.log.warn({ epoch, pods: pending }, 'key change: some processes did not acknowledge within the lease; their caches have lapsed');
    return { epoch, waitedFor: pending };
  }
}

/** A key change in flight (beginChange .. publishChange). */
interface KeyChange {
  id: string;
  /** Monotonic time the mark was written. */
  markedAt: number;
}
