/**
 * Idempotency keys of ingest requests: an `Idempotency-Key` header (one key
 * for the whole request) or an `idempotency_key` per event. A key is scoped
 * to the ingest token and kept 24 h (`ingest_keys`, `_id` = sha256 of kind,
 * token and key, TTL index on expires_at; readers check expiry too).
 *
 * A key is reserved before anything is produced, with the event ids and times
 * its events get; the outcome (cursors) is stored after Kafka acknowledged.
 * - A retry of a finished request gets the stored ids and cursors; nothing is written.
 * - A retry of a failed attempt (503, or a batch that failed part-way) takes
 *   the reservation over and produces again with the same ids: events the
 *   failed attempt did append are stored once (the materializer keeps one
 *   event per id).
 * - A retry while the first attempt is still running gets 409 (Retry-After);
 *   two pods cannot both win the reservation (a unique `_id` insert).
 * - An attempt that died (crash between Kafka's ack and storing the outcome)
 *   leaves a reservation whose lease expires; the next retry takes it over as
 *   above, with the same ids.
 * - The same key with another body is refused (409).
 */
import { createHash, randomBytes } from 'node:crypto';
import { MongoServerError, type Collection } from 'mongodb';
import { AppError } from '../../../../shared/src/errors/index.js';
import { newEventId } from '../../../../shared/src/eventlog/envelope.js';
import { runPeriodically } from '../../../../shared/src/periodic.js';
import type { IngestKeyDoc } from '../../../../shared/src/mongo/documents.js';

const KEY_TTL_MS = 24 * 60 * 60 * 1000;
const MAX_KEY_LENGTH = 255;

export interface Claim {
  _id: string;
  kind: IngestKeyDoc['kind'];
  bodyHash: string;
  /** Indexes of the request's events this key covers. */
  indexes: number[];
}

type Reservation =
  /** Ours: produce with these ids and times, then `complete` or `fail`. */
  | { state: 'reserved'; claim: Claim; attempt: string; ids: string[]; createdAt: string[] }
  /** Finished earlier: answer with these, produce nothing. */
  | { state: 'done'; claim: Claim; ids: string[]; cursors: string[] };

export function keyId(kind: IngestKeyDoc['kind'], token: string, key: string): string {
  return createHash('sha256').update(`${kind}\0${createHash('sha256').update(token).digest('hex')}\0${key}`).digest('hex');
}

export function bodyHash(value: unknown): string {
  return createHash('sha256').update(JSON.stringify(value)).digest('hex');
}

/** The header's value, checked: 1 to 255 visible ASCII characters. */
export function checkKey(key: string, where: string): string {
  if (key.length === 0 || key.length > MAX_KEY_LENGTH || !/^[\x21-\x7e]+$/.test(key)) {
    throw new AppError('validation_failed', 'Request validation failed', [{ path: where, message: `must be 1 to ${MAX_KEY_LENGTH} visible ASCII characters` }]);
  }
  return key;
}

export class IdempotencyKeys {
  constructor(
    private readonly keys: Collection<IngestKeyDoc>,
    /** How long a reservation is held by a running attempt before another may take it over. */
    private readonly leaseMs: number,
    private readonly clock: () => Date = () => new Date(),
  ) {}

  /**
   * Reserves every claim, or none: a claim another attempt holds (409) or
   * reused for another body (409) releases the ones already reserved.
   */
  async reserveAll(claims: Claim[], sizes: (claim: Claim) => number): Promise<Reservation[]> {
    const attempt = randomBytes(12).toString('hex');
    const settled = await Promise.allSettled(claims.map((c) => this.reserve(c, attempt, sizes(c))));
    const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (!failed) return settled.map((s) => (s as PromiseFulfilledResult<Reservation>).value);
    const ours = settled.flatMap((s) => (s.status === 'fulfilled' && s.value.state === 'reserved' ? [s.value] : []));
    await this.fail(ours).catch(() => undefined); // a lease that is not released expires
    throw failed.reason;
  }

  /** Stores the outcome; a failure to store leaves a reservation that expires (the retry then writes the same ids again). */
  async complete(reservations: Reservation[], cursorsOf: (r: Reservation) => string[]): Promise<void> {
    await Promise.all(
      reservations.flatMap((r) =>
        r.state === 'reserved' ? [this.keys.updateOne({ _id: r.claim._id, attempt: r.attempt }, { $set: { state: 'done', cursors: cursorsOf(r), lease_until: this.clock() } })] : [],
      ),
    );
  }

  /** Releases the reservations of a failed attempt, keeping their ids for the retry. */
  async fail(reservations: Reservation[]): Promise<void> {
    await Promise.all(
      reservations.flatMap((r) => (r.state === 'reserved' ? [this.keys.updateOne({ _id: r.claim._id, attempt: r.attempt, state: 'pending' }, { $set: { state: 'failed', lease_until: this.clock() } })] : [])),
    );
  }

  private async reserve(claim: Claim, attempt: string, size: number): Promise<Reservation> {
    for (let round = 0; round < 5; round++) {
      const now = this.clock();
      const lease = new Date(now.getTime() + this.leaseMs);
      const fresh: IngestKeyDoc = {
        _id: claim._id,
        kind: claim.kind,
        body_hash: claim.bodyHash,
        state: 'pending',
        attempt,
        lease_until: lease,
        ids: Array.from({ length: size }, () => newEventId()),
        created_at: Array.from({ length: size }, () => now.toISOString()),
        cursors: null,
        expires_at: new Date(now.getTime() + KEY_TTL_MS),
      };
      try {
        await this.keys.insertOne(fresh);
        return { state: 'reserved', claim, attempt, ids: fresh.ids, createdAt: fresh.created_at };
      } catch (err) {
        if (!(err instanceof MongoServerError && err.code === 11000)) throw err;
      }
      const existing = await this.keys.findOne({ _id: claim._id });
      if (!existing) continue; // expired and removed meanwhile
      if (existing.expires_at <= now) {
        await this.keys.deleteOne({ _id: claim._id, attempt: existing.attempt, expires_at: existing.expires_at });
        continue;
      }
      if (existing.body_hash !== claim.bodyHash || existing.ids.length !== size) throw reused(claim);
      if (existing.state === 'done' && existing.cursors) return { state: 'done', claim, ids: existing.ids, cursors: existing.cursors };
      if (existing.state === 'pending' && existing.lease_until > now) throw inProgress(claim, existing.lease_until.getTime() - now.getTime());
      // A failed attempt, or one that died holding the lease: take it over, with its ids.
      const taken = await this.keys.updateOne(
        { _id: claim._id, attempt: existing.attempt, state: existing.state },
        { $set: { state: 'pending', attempt, lease_until: lease } },
      );
      if (taken.modifiedCount === 1) return { state: 'reserved', claim, attempt, ids: existing.ids, createdAt: existing.created_at };
    }
    throw inProgress(claim, 1000);
  }
}

function where(claim: Claim): string {
  return claim.kind === 'request' ? 'Idempotency-Key' : `events[${claim.indexes[0]}].idempotency_key`;
}

function reused(claim: Claim): AppError {
  return new AppError('conflict', 'This idempotency key was already used for a different request body; use a new key for new events', [
    { path: where(claim), message: 'already used with a different body (keys are kept 24 hours)' },
  ]);
}

function inProgress(claim: Claim, retryInMs: number): AppError {
  return new AppError(
    'conflict',
    'A request with this idempotency key is still being processed; retry shortly',
    [{ path: where(claim), message: 'in progress' }],
    { 'Retry-After': String(Math.max(1, Math.ceil(retryInMs / 1000))) },
  );
}

/**
 * Removes keys past their 24 h (a TTL index does it on MongoDB; FerretDB has
 * none). Readers check `expires_at` anyway, so a late sweep only costs space.
 */
export function startKeySweeper(keys: Collection<IngestKeyDoc>, log: { warn: (o: object, m: string) => void }, intervalMs = 10 * 60_000): () => void {
  return runPeriodically(
    intervalMs,
    () => {
      keys.deleteMany({ expires_at: { $lt: new Date() } }).catch((err: unknown) => log.warn({ err }, 'could not sweep expired ingest idempotency keys; will try again'));
    },
    0.2,
  );
}
