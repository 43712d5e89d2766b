import type { Context } from 'koa';
import { RateLimiterRes } from 'rate-limiter-flexible';
import { AppError, unavailable } from '../../../../shared/src/errors/index.js';
import type { Logger } from '../../../../shared/src/log.js';
import { COLLECTION_NAMES, type Mongo } from '../../../../shared/src/mongo/index.js';
import type { ApiConfig } from '../../config.js';
import { WindowedMongoStore } from './window-store.js';

/** Where a subject stands in its current window, for the RateLimit-* headers. */
export interface RateState {
  limit: number;
  remaining: number;
  /** Seconds until the window ends and the budget is full again. */
  resetSeconds: number;
}

function seconds(ms: number): number {
  return Math.max(1, Math.ceil(ms / 1000));
}

export function rateHeaders(state: RateState): Record<string, string> {
  return {
    'RateLimit-Limit': String(state.limit),
    'RateLimit-Remaining': String(state.remaining),
    'RateLimit-Reset': String(state.resetSeconds),
  };
}

export function setRateHeaders(ctx: Context, state: RateState): void {
  ctx.set(rateHeaders(state));
}

interface SubjectQueue {
  /** A counter write for this subject is in flight. */
  writing: boolean;
  /** Requests to count with the next write. */
  waiting: { resolve(state: RateState): void; reject(err: unknown): void }[];
}

/**
 * A fixed-window limit whose counters live in MongoDB, so every API process
 * draws from the same budget. Over the limit: 429 with Retry-After and the
 * RateLimit-* headers. Store unreachable: 503, because letting traffic through
 * unmetered would turn a MongoDB outage into a limit bypass.
 */
export class SharedLimiter {
  private readonly store: WindowedMongoStore;

  constructor(
    mongo: Mongo,
    readonly name: string,
    readonly points: number,
    readonly durationSeconds: number,
    private readonly describe: string,
    private readonly log: Logger,
  ) {
    this.store = new WindowedMongoStore(
      {
        storeClient: mongo.client,
        dbName: mongo.db.databaseName,
        tableName: COLLECTION_NAMES.rateLimits,
        keyPrefix: name,
        points,
        duration: durationSeconds,
        // shared/src/mongo creates the indexes (TTL where the server has it).
        disableIndexesCreation: true,
      },
      mongo.collections.rateLimits,
    );
  }

  /**
   * Counts one request of `subject`. Requests of one subject that arrive
   * while its counter write is in flight are counted together by the next
   * write (one `$inc` of n), and admitted by their place in the returned
   * total: request k of the n is over the limit exactly when it would have
   * been with n separate writes. A lone request is written at once, so
   * nothing waits when traffic is light; a burst (a dashboard's or an
   * agent's many long-polls coming back together) costs one write, not one
   * per request.
   */
  consume(subject: string): Promise<RateState> {
    return new Promise<RateState>((resolve, reject) => {
      let queue = this.queues.get(subject);
      if (!queue) {
        queue = { writing: false, waiting: [] };
        this.queues.set(subject, queue);
      }
      queue.waiting.push({ resolve, reject });
      if (!queue.writing) void this.write(subject, queue);
    });
  }

  private readonly queues = new Map<string, SubjectQueue>();

  /** Gives back one point of `subject`'s current window (a login that succeeded does not count as a failure). */
  async refund(subject: string): Promise<void> {
    await this.store.reward(subject, 1);
  }

  private async write(subject: string, queue: SubjectQueue): Promise<void> {
    const batch = queue.waiting.splice(0);
    queue.writing = true;
    let res: RateLimiterRes | null = null;
    try {
      res = await this.store.consume(subject, batch.length);
    } catch (err) {
      if (err instanceof RateLimiterRes) res = err;
      else {
        this.log.warn({ err, limiter: this.name }, 'rate limit store unavailable');
        for (const w of batch) w.reject(unavailable('Rate limiting'));
      }
    }
    if (res) {
      const before = res.consumedPoints - batch.length;
      const resetSeconds = seconds(res.msBeforeNext);
      batch.forEach((w, i) => {
        const used = before + i + 1;
        if (used <= this.points) w.resolve({ limit: this.points, remaining: this.points - used, resetSeconds });
        else w.reject(this.exceeded(res));
      });
    }
    queue.writing = false;
    if (queue.waiting.length > 0) void this.write(subject, queue);
    else this.queues.delete(subject);
  }

  private exceeded(res: RateLimiterRes): AppError {
    const retryAfter = seconds(res.msBeforeNext);
    const headers = rateHeaders({ limit: this.points, remaining: 0, resetSeconds: retryAfter });
    return new AppError('rate_limited', `Rate limit exceeded: ${this.describe}; retry in ${retryAfter} s`, undefined, {
      ...headers,
      'Retry-After': String(retryAfter),
    });
  }
}

export interface RateLimits {
  /** Per account's API key, docs/spec.md: 100 per minute. */
  apiKey: SharedLimiter;
  /** Per user, for session-token traffic (our decision: 600 per minute). */
  session: SharedLimiter;
  /** Per client IP (IPv6 per /64), docs/spec.md: 10 signups per hour. */
  signup: SharedLimiter;
  /** Per client IP, every login attempt (our decision: 30 per minute). */
  login: SharedLimiter;
  /**
   * Per email, existing or not, from any address: failed logins (our decision:
   * 10 per 15 minutes). Each attempt takes a point before the password is
   * checked and a success gives it back.
   */
  loginAccount: SharedLimiter;
}

export function createRateLimits(config: ApiConfig, mongo: Mongo, log: Logger): RateLimits {
  const { apiKeyPerMinute, sessionPerMinute, signupPerHour, loginPerMinute, loginFailuresPerAccount, loginAccountWindowSeconds } = config.limits;
  const accountWindow = loginAccountWindowSeconds % 60 === 0 ? `${loginAccountWindowSeconds / 60} minutes` : `${loginAccountWindowSeconds} s`;
  return {
    apiKey: new SharedLimiter(mongo, 'apikey', apiKeyPerMinute, 60, `${apiKeyPerMinute} requests per minute per API key`, log),
    session: new SharedLimiter(mongo, 'session', sessionPerMinute, 60, `${sessionPerMinute} requests per minute per user with a session token`, log),
    signup: new SharedLimiter(mongo, 'signup', signupPerHour, 3600, `${signupPerHour} signups per hour from one address`, log),
    login: new SharedLimiter(mongo, 'login', loginPerMinute, 60, `${loginPerMinute} login attempts per minute from one address`, log),
    loginAccount: new SharedLimiter(mongo, 'loginacct', loginFailuresPerAccount, loginAccountWindowSeconds, `${loginFailuresPerAccount} failed logins per ${accountWindow} for one email`, log),
  };
}
