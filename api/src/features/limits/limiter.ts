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

  async consume(subject: string): Promise<RateState> {
    let res: RateLimiterRes;
    try {
      res = await this.store.consume(subject);
    } catch (err) {
      if (err instanceof RateLimiterRes) throw this.exceeded(err);
      this.log.warn({ err, limiter: this.name }, 'rate limit store unavailable');
      throw unavailable('Rate limiting');
    }
    return { limit: this.points, remaining: res.remainingPoints, resetSeconds: seconds(res.msBeforeNext) };
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
  /** Per account's API key, SPEC.md: 100 per minute. */
  apiKey: SharedLimiter;
  /** Per user, for session-token traffic (our decision: 600 per minute). */
  session: SharedLimiter;
  /** Per client IP (IPv6 per /64), SPEC.md: 10 signups per hour. */
  signup: SharedLimiter;
  /** Per client IP, every login attempt (our decision: 30 per minute). */
  login: SharedLimiter;
}

export function createRateLimits(config: ApiConfig, mongo: Mongo, log: Logger): RateLimits {
  const { apiKeyPerMinute, sessionPerMinute, signupPerHour, loginPerMinute } = config.limits;
  return {
    apiKey: new SharedLimiter(mongo, 'apikey', apiKeyPerMinute, 60, `${apiKeyPerMinute} requests per minute per API key`, log),
    session: new SharedLimiter(mongo, 'session', sessionPerMinute, 60, `${sessionPerMinute} requests per minute per user with a session token`, log),
    signup: new SharedLimiter(mongo, 'signup', signupPerHour, 3600, `${signupPerHour} signups per hour from one address`, log),
    login: new SharedLimiter(mongo, 'login', loginPerMinute, 60, `${loginPerMinute} login attempts per minute from one address`, log),
  };
}
