import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import { AppError } from '#shared/errors/index.js';
import type { PasswordHash } from '#shared/mongo/index.js';

interface ScryptParams {
  N: number;
  r: number;
  p: number;
  keylen: number;
}

/**
 * OWASP's scrypt floor (N=2^17, r=8, p=1): about 128 MB and, on the reference
 * machine, ~0.3-0.7 s of one core per derivation. Stored beside each hash, so
 * a hash made with weaker parameters is recognised and upgraded at the next
 * successful login.
 */
export const SCRYPT_PARAMS: ScryptParams = { N: 2 ** 17, r: 8, p: 1, keylen: 64 };
const SALT_BYTES = 16;

/** Bytes scrypt needs for these parameters (Node refuses a run whose need exceeds `maxmem`). */
export function scryptMemory(params: Pick<ScryptParams, 'N' | 'r' | 'p'>): number {
  return 128 * params.r * (params.N + params.p + 2);
}

function derive(password: string, salt: Buffer, params: ScryptParams): Promise<Buffer> {
  // Node's default maxmem is 32 MB; N=2^17, r=8 needs 128 MB. 1 MB of margin.
  const options: ScryptOptions = { N: params.N, r: params.r, p: params.p, maxmem: scryptMemory(params) + 1024 * 1024 };
  // NFC so the same password typed on different systems derives the same key.
  const input = password.normalize('NFC');
  return new Promise((resolve, reject) => {
    scrypt(input, salt, params.keylen, options, (err, key) => (err ? reject(err) : resolve(key)));
  });
}

/** A stored hash made with less work than `target` (so it is re-hashed at the next successful login). */
export function isWeaker(stored: PasswordHash, target: ScryptParams): boolean {
  return stored.algo !== 'scrypt' || stored.N < target.N || stored.r < target.r || stored.p < target.p || stored.keylen < target.keylen;
}

/**
 * Hashes and verifies passwords with one set of scrypt parameters, running
 * at most `maxConcurrent` derivations at once; the rest wait their turn.
 * Each derivation holds a libuv threadpool thread (shared with fs, dns.lookup
 * and zlib) and 128 MB for its whole run, so an unbounded burst of logins
 * would take every thread and N x 128 MB. Throughput is CPU-bound whatever
 * the pool size or cap, while uncapped derivations on the default 4-thread
 * pool delay every fs call behind them by seconds (scripts/bench/login.mjs
 * measures both; figures in docs/security.md). So: the default pool, 2 at once.
 */
export class PasswordHasher {
  private running = 0;
  private readonly queue: (() => void)[] = [];
  private dummy: Promise<PasswordHash> | null = null;

  constructor(
    readonly params: ScryptParams = SCRYPT_PARAMS,
    readonly maxConcurrent = 2,
    /** Derivations that may wait for a slot; one more is refused with 503 (at ~1.5 logins/s, 32 is ~20 s of queue). */
    readonly maxWaiting = 32,
  ) {}

  /** Derivations running and waiting, for tests and metrics. */
  get load(): { running: number; waiting: number } {
    return { running: this.running, waiting: this.queue.length };
  }

  private async limited<T>(work: () => Promise<T>): Promise<T> {
    if (this.running >= this.maxConcurrent) {
      // A flood of logins (from many addresses) would otherwise queue without end, each
      // client waiting longer than it will; refuse early instead. Same for known and unknown emails.
      if (this.queue.length >= this.maxWaiting) {
        throw new AppError('unavailable', 'Too many sign-ins in progress, try again shortly', undefined, { 'Retry-After': '1' });
      }
      await new Promise<void>((resolve) => this.queue.push(resolve));
    }
    else this.running++;
    try {
      return await work();
    } finally {
      const next = this.queue.shift();
      // The slot passes straight to the next waiter, so `running` never dips under a queue.
      if (next) next();
      else this.running--;
    }
  }

  async hash(password: string): Promise<PasswordHash> {
    const salt = randomBytes(SALT_BYTES);
    const key = await this.limited(() => derive(password, salt, this.params));
    return { algo: 'scrypt', salt: salt.toString('base64'), hash: key.toString('base64'), ...this.params };
  }

  /** Checks with the parameters stored beside the hash, whatever this hasher's are. */
  async verify(password: string, stored: PasswordHash): Promise<boolean> {
    if (stored.algo !== 'scrypt') return false;
    const expected = Buffer.from(stored.hash, 'base64');
    const params = { N: stored.N, r: stored.r, p: stored.p, keylen: stored.keylen };
    const actual = await this.limited(() => derive(password, Buffer.from(stored.salt, 'base64'), params));
    return actual.length === expected.length && timingSafeEqual(actual, expected);
  }

  /** Whether `stored` should be replaced by a hash with this hasher's parameters. */
  needsUpgrade(stored: PasswordHash): boolean {
    return isWeaker(stored, this.params);
  }

  /** Makes the dummy hash ahead of the first unknown-email login, which would otherwise pay for two derivations. */
  prepareDummy(): Promise<void> {
    this.dummy ??= this.hash(randomBytes(16).toString('hex')).catch((err: unknown) => {
      this.dummy = null;
      throw err;
    });
    return this.dummy.then(() => undefined);
  }

  /**
   * Spends the same work as checking a real password, for a login whose email
   * is unknown: without it the fast "no such user" answer would tell an
   * attacker which emails have accounts.
   */
  async verifyAgainstDummy(password: string): Promise<false> {
    // A dummy that could not be made (refused while the queue was full) is made again next time.
    await this.prepareDummy();
    await this.verify(password, await this.dummy!);
    return false;
  }
}

const defaultHasher = new PasswordHasher();

/** With the default parameters (OWASP floor). */
export function hashPassword(password: string): Promise<PasswordHash> {
  return defaultHasher.hash(password);
}

export function verifyPassword(password: string, stored: PasswordHash): Promise<boolean> {
  return defaultHasher.verify(password, stored);
}
