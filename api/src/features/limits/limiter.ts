import type { Context } from 'koa';
import { AppError, unavailable } from '#shared/errors/index.js';
import type { Logger } from '#shared/log.js';
import { COLLECTION_NAMES, type Mongo } from '#shared/mongo/index.js';
import type { ApiConfig } from '../../config.js';
import { admitLocally, decide, localCap, newCounts, startWrite, writeFailed, writeSucceeded, type LocalCounts, type LocalPolicy } from './local-window.js';
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

function rateHeaders(state: RateState): Record<string, string> {
  return {
    'RateLimit-Limit': String(state.limit),
    'RateLimit-Remaining': String(state.remaining),
    'RateLimit-Reset': String(state.resetSeconds),
  };
}

export function setRateHeaders(ctx: Context, state: RateState): void {
  ctx.set(rateHeaders(state));
}

interface Waiter {
  resolve(state: RateState): void;
  reject(err: unknown): void;
}

/** One subject's window as this process sees it. */
interface WindowEntry {
  subject: string;
  /** Window start and end, ms since the epoch. */
  start: number;
  end: number;
  counts: LocalCounts;
  /** A write of this window is in flight. */
  writing: boolean;
  /** Requests to count with the next write, admitted by their place in its total. */
  waiting: Waiter[];
}

/** Local counting of a SharedLimiter (docs/api.md, "Limits"). */
interface LocalCounting {
  /** Local admissions are written at most this long after (all subjects in one pass). */
  flushMs: number;
  /** Most locally admitted requests per process not yet counted by a returned write. */
  cap: number;
  /** Local admission stops this far below the limit (default: `cap`). */
  margin?: number;
}

/**
 * A fixed-window limit whose counters live in MongoDB, so every API process
 * draws from the same budget. Over the limit: 429 with Retry-After and the
 * RateLimit-* headers. Store unreachable: 503, because letting traffic through
 * unmetered would turn a MongoDB outage into a limit bypass.
 *
 * Without `local`, every request is written (exact). With it, a process
 * admits up to `cap` requests of a subject's window on what it knows,
 * writes them together every `flushMs`, and refuses a window it knows is
 * spent without writing (local-window.ts); a shared window may then admit up
 * to limit + processes × cap.
 */
export class SharedLimiter {
  private readonly store: WindowedMongoStore;
  private readonly policy: LocalPolicy;
  private readonly flushMs: number;
  private readonly windows = new Map<string, WindowEntry>();
  /** False after a failed write until a write succeeds: no local admissions meanwhile. */
  private storeOk = true;
  private flushTimer: NodeJS.Timeout | null = null;

  constructor(
    mongo: Mongo,
    readonly name: string,
    readonly points: number,
    readonly durationSeconds: number,
    private readonly describe: string,
    private readonly log: Logger,
    local?: LocalCounting,
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
    const cap = local && local.flushMs > 0 ? Math.max(0, local.cap) : 0;
    this.policy = { limit: points, cap, margin: local?.margin ?? cap };
    this.flushMs = local?.flushMs ?? 0;
  }

  /**
   * Counts one request of `subject`. Admitted locally when local-window.ts
   * allows it; refused at once when this process knows the window is spent;
   * otherwise written. Requests of one subject that arrive while its counter
   * write is in flight are counted together by the next write (one `$inc`
   * of n, with any pending local admissions), and admitted by their place in
   * the returned total: request k of the n is over the limit exactly when it
   * would have been with n separate writes.
   */
  consume(subject: string): Promise<RateState> {
    const now = Date.now();
    const w = this.window(subject, now);
    const decision = decide(w.counts, this.policy, this.storeOk);
    if (decision === 'local') {
      const remaining = admitLocally(w.counts, this.policy);
      this.scheduleFlush();
      return Promise.resolve({ limit: this.points, remaining, resetSeconds: seconds(w.end - now) });
    }
    if (decision === 'refuse') return Promise.reject(this.exceeded(w.end - now));
    return new Promise<RateState>((resolve, reject) => {
      w.waiting.push({ resolve, reject });
      if (!w.writing) void this.write(w);
    });
  }

  /** Gives back one point of `subject`'s current window (a login that succeeded does not count as a failure). */
  async refund(subject: string): Promise<void> {
    await this.store.reward(subject, 1);
  }

  /** Writes every pending local admission now (shutdown); resolves when the writes returned. */
  async flush(): Promise<void> {
    if (this.flushTimer) clearTimeout(this.flushTimer);
    this.flushTimer = null;
    await Promise.all([...this.windows.values()].filter((w) => w.counts.pending > 0 && !w.writing).map((w) => this.write(w)));
  }

  private window(subject: string, now: number): WindowEntry {
    const ms = this.durationSeconds * 1000;
    const start = Math.floor(now / ms) * ms;
    const id = `${subject}:${start}`;
    let w = this.windows.get(id);
    if (!w) {
      if (now - this.lastSweep >= ms) this.sweep(now);
      w = { subject, start, end: start + ms, counts: newCounts(), writing: false, waiting: [] };
      this.windows.set(id, w);
    }
    return w;
  }

  private lastSweep = 0;

  /** Forgets ended windows with nothing owed or in flight. */
  private sweep(now: number): void {
    this.lastSweep = now;
    for (const [id, w] of this.windows) if (!w.writing && w.counts.pending === 0 && w.end <= now) this.windows.delete(id);
  }

  /** One flush pass for all subjects, `flushMs` after the first local admission that found none scheduled. */
  private scheduleFlush(): void {
    if (this.flushTimer) return;
    this.flushTimer = setTimeout(() => {
      this.flushTimer = null;
      for (const w of this.windows.values()) if (w.counts.pending > 0 && !w.writing) void this.write(w);
    }, this.flushMs);
    this.flushTimer.unref();
  }

  private async write(w: WindowEntry): Promise<void> {
    const batch = w.waiting.splice(0);
    const locals = startWrite(w.counts);
    w.writing = true;
    try {
      const doc = await this.store.addPoints(w.subject, w.start, locals + batch.length);
      this.storeOk = true;
      writeSucceeded(w.counts, doc.points);
      const before = doc.points - batch.length;
      const left = w.end - Date.now();
      batch.forEach((waiter, i) => {
        const used = before + i + 1;
        if (used <= this.points) waiter.resolve({ limit: this.points, remaining: this.points - used, resetSeconds: seconds(left) });
        else waiter.reject(this.exceeded(left));
      });
    } catch (err) {
      this.storeOk = false;
      // Requests admitted locally stay owed and go with the next write; until one succeeds every request is written, so gets 503.
      writeFailed(w.counts);
      this.log.warn({ err, limiter: this.name, owed: w.counts.pending }, 'rate limit store unavailable');
      for (const waiter of batch) waiter.reject(unavailable('Rate limiting'));
    }
    w.writing = false;
    if (w.waiting.length > 0) void this.write(w);
    else if (w.counts.pending > 0) this.scheduleFlush();
    else if (this.policy.cap <= 0 || w.end <= Date.now()) this.windows.delete(`${w.subject}:${w.start}`);
  }

  private exceeded(msLeft: number): AppError {
    const retryAfter = seconds(msLeft);
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
  // API-key and session budgets count locally (5% of the budget per process, flushed every flushMs); the
  // signup and login limiters stay exact: small budgets, rare requests, and login refunds points.
  const local = (limit: number): LocalCounting => ({ flushMs: config.limits.flushMs, cap: localCap(limit) });
  const accountWindow = loginAccountWindowSeconds % 60 === 0 ? `${loginAccountWindowSeconds / 60} minutes` : `${loginAccountWindowSeconds} s`;
  // In development the refusal names the setting that changes the limit (the developer runs the
  // server too); elsewhere the caller is a client of someone else's server, and gets the limit only.
  const set = (text: string, setting: string): string => (config.development ? `${text} (${setting} on the server)` : text);
  return {
    apiKey: new SharedLimiter(mongo, 'apikey', apiKeyPerMinute, 60, set(`${apiKeyPerMinute} requests per minute per API key`, 'API_KEY_LIMIT_PER_MINUTE'), log, local(apiKeyPerMinute)),
    session: new SharedLimiter(mongo, 'session', sessionPerMinute, 60, set(`${sessionPerMinute} requests per minute per user with a session token`, 'SESSION_LIMIT_PER_MINUTE'), log, local(sessionPerMinute)),
    signup: new SharedLimiter(mongo, 'signup', signupPerHour, 3600, set(`${signupPerHour} signups per hour from one address`, 'SIGNUP_LIMIT_PER_HOUR'), log),
    login: new SharedLimiter(mongo, 'login', loginPerMinute, 60, set(`${loginPerMinute} login attempts per minute from one address`, 'LOGIN_LIMIT_PER_MINUTE'), log),
    loginAccount: new SharedLimiter(
      mongo,
      'loginacct',
      loginFailuresPerAccount,
      loginAccountWindowSeconds,
      set(`${loginFailuresPerAccount} failed logins per ${accountWindow} for one email`, 'LOGIN_FAILURES_PER_ACCOUNT, LOGIN_ACCOUNT_WINDOW_S'),
      log,
    ),
  };
}

/** Writes every limiter's pending local admissions (before the store closes at shutdown). */
export async function flushRateLimits(limits: RateLimits): Promise<void> {
  await Promise.all(Object.values(limits).map((l: SharedLimiter) => l.flush()));
}
