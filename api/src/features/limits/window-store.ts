import { RateLimiterMongo, type IRateLimiterMongoOptions } from 'rate-limiter-flexible';
import type { Collection, UpdateFilter } from 'mongodb';
import type { Logger } from '#shared/log.js';
import { RATE_WINDOW_GRACE_MS, type RateLimitDoc } from '#shared/mongo/index.js';
import { runPeriodically } from '#shared/periodic.js';

/**
 * rate-limiter-flexible's MongoDB store with each fixed window in a document
 * of its own, found by `_id` alone: `<limiter>:<subject>:<window start, ms>`,
 * windows aligned to the clock. The library's own store finds a key's
 * document by `{key, $or: [expire...]}`, which MongoDB answers from its
 * unique index but FerretDB (the test server) answers by decoding the whole
 * collection on every request; an `_id` equality is a primary-key lookup on
 * both. It also needs no "reset an expired window" step: a new window is a
 * new document, so two processes starting one race only on an `_id` insert,
 * which the server decides (the loser retries and increments the winner's).
 *
 * The library keeps its contract (consume, penalty, reward, get, delete,
 * block, RateLimiterRes); only the three storage methods below differ.
 * Old windows are removed by the TTL index on `expire` where the server has
 * one, and by `sweepExpiredWindows` otherwise.
 */
export class WindowedMongoStore extends RateLimiterMongo {
  constructor(
    opts: IRateLimiterMongoOptions,
    private readonly windows: Collection<RateLimitDoc>,
  ) {
    super(opts);
    this.windowMs = opts.duration === undefined ? 0 : opts.duration * 1000;
  }

  private readonly windowMs: number;

  /** The current window of `rlKey`: its document id and when it ends. */
  private window(rlKey: string, msDuration: number): { _id: string; expire: Date | null } {
    if (msDuration <= 0) return { _id: rlKey, expire: null }; // a limit that never resets
    const start = Math.floor(Date.now() / msDuration) * msDuration;
    return { _id: `${rlKey}:${start}`, expire: new Date(start + msDuration) };
  }

  /** Adds `points` to the key's current window (creating it), or sets them with `forceExpire`. */
  async _upsert(rlKey: string, points: number, msDuration: number, forceExpire = false): Promise<RateLimitDoc> {
    const { _id, expire } = this.window(rlKey, msDuration);
    const update = forceExpire ? { $set: { key: rlKey, points, expire } } : { $setOnInsert: { key: rlKey, expire }, $inc: { points } };
    return this.upsertWindow(_id, update);
  }

  /**
   * Adds `points` to the window of `subject` that starts at `start` (ms), the
   * window a request was admitted in even if it has ended since; returns the
   * window's total. One `findOneAndUpdate` by `_id`.
   */
  async addPoints(subject: string, start: number, points: number): Promise<RateLimitDoc> {
    const rlKey = this.getKey(subject);
    return this.upsertWindow(`${rlKey}:${start}`, { $setOnInsert: { key: rlKey, expire: new Date(start + this.windowMs) }, $inc: { points } });
  }

  private async upsertWindow(_id: string, update: UpdateFilter<RateLimitDoc>): Promise<RateLimitDoc> {
    for (let attempt = 0; ; attempt++) {
      try {
        const doc = await this.windows.findOneAndUpdate({ _id }, update, { upsert: true, returnDocument: 'after' });
        if (doc) return doc;
        throw new Error('rate limit window upsert returned no document');
      } catch (err) {
        // Two processes created the window at once: the other insert won, so this one now updates it.
        if ((err as { code?: unknown }).code !== 11000 || attempt >= 2) throw err;
      }
    }
  }

  async _get(rlKey: string): Promise<RateLimitDoc | null> {
    return this.windows.findOne({ _id: this.window(rlKey, this.windowMs)._id });
  }

  async _delete(rlKey: string): Promise<boolean> {
    const { deletedCount } = await this.windows.deleteOne({ _id: this.window(rlKey, this.windowMs)._id });
    return deletedCount > 0;
  }
}

/**
 * Deletes windows that ended more than `graceMs` ago. MongoDB's TTL index does
 * this by itself, with the same grace; FerretDB has no TTL indexes, so each
 * API process runs this now and then (idempotent, so several processes doing
 * it is harmless).
 */
export async function sweepExpiredWindows(windows: Pick<Collection<RateLimitDoc>, 'deleteMany'>, now: Date, graceMs = RATE_WINDOW_GRACE_MS): Promise<number> {
  const { deletedCount } = await windows.deleteMany({ expire: { $lt: new Date(now.getTime() - graceMs) } });
  return deletedCount;
}

/** Sweeps ended windows every `intervalMs` (with jitter, so pods spread out); returns a stop function. */
export function startWindowSweeper(windows: Collection<RateLimitDoc>, log: Logger, intervalMs = 60_000): () => void {
  return runPeriodically(
    intervalMs,
    () => {
      sweepExpiredWindows(windows, new Date()).then(
        (n) => n > 0 && log.debug({ windows: n }, 'swept ended rate-limit windows'),
        (err: unknown) => log.warn({ err }, 'could not sweep ended rate-limit windows; will try again'),
      );
    },
    0.2,
  );
}
