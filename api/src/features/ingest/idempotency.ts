/**
 * Idempotency keys of ingest requests: an `Idempotency-Key` header (one key
 * for the whole request, scoped to the ingest token) or an `idempotency_key`
 * per event (scoped to the ingest token and the event's account: two
 * accounts' events never share a key). Kept 24 h (`ingest_keys`, `_id` =
 * sha256 of kind, token, account and key; TTL index on expires_at; readers
 * check expiry too).
 *
 * A key is reserved before anything is produced, with the event ids and times
 * its events get (attempt 0: the unique insert of the key). Everything after
 * is a step `<key>:<attempt 0>:<n>` that ends attempt n - 1, taken by a unique insert and
 * never updated (IngestKeyStepDoc): `done` (the outcome, after Kafka
 * acknowledged), `released` (the attempt failed) or `attempt` (a retry took
 * the key over). No conditional update decides anything: FerretDB applies
 * those read-then-write, so two retries could both win one.
 * - A retry of a finished request gets the stored ids and cursors; nothing is written.
 * - A retry of a failed attempt (503, or a batch that failed part-way) takes
 *   the key over and produces again with the same ids: events the failed
 *   attempt did append are stored once (the materializer keeps one event per
 *   id). Of two retries at once
 *   exactly one takes it over; the other gets 409 (Retry-After).
 * - A retry while an attempt still holds its lease gets 409 (Retry-After).
 * - An attempt that died (crash between Kafka's ack and storing the outcome)
 *   leaves a lease that runs out; the next retry takes the key over as above.
 * - An attempt whose outcome is stored later than its lease (a slow store)
 *   races a retry's takeover for the same step: if the outcome is stored
 *   first the retry answers it and produces nothing; if the takeover is, the
 *   late outcome is dropped and the retry produces the same ids again (one
 *   event, on the topic twice). Either way every answer for the key carries
 *   the same ids. An attempt does not produce once its lease has run out.
 * - The same key with another body is refused (409).
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Collection } from 'mongodb';
import { AppError } from '#shared/errors/index.js';
import { newEventId } from '#shared/eventlog/envelope.js';
import { runPeriodically } from '#shared/periodic.js';
import type { IngestKeyDoc, IngestKeyStepDoc } from '#shared/mongo/documents.js';
import { isDuplicateKey } from '#shared/mongo/index.js';

const KEY_TTL_MS = 24 * 60 * 60 * 1000;
const MAX_KEY_LENGTH = 255;
/** How long after the first process with per-account event keys started an event key of the earlier format may still be read: its 24 h, and an hour for the rolling deploy. */
const LEGACY_WINDOW_MS = KEY_TTL_MS + 60 * 60 * 1000;
const LEGACY_MARKER = 'format:event-keys-per-account';

export interface Claim {
  _id: string;
  kind: IngestKeyDoc['kind'];
  bodyHash: string;
  /** Indexes of the request's events this key covers. */
  indexes: number[];
  /** A per-event key: its account, and the key's id in the format before keys were per account. */
  accountId?: string;
  legacyId?: string;
}

type Reservation =
  /** Ours (attempt `step`): produce with these ids and times, then `complete` or `fail`. */
  | { state: 'reserved'; claim: Claim; steps: string; attempt: string; step: number; leaseUntil: Date; expiresAt: Date; ids: string[]; createdAt: string[] }
  /** Finished earlier: answer with these, produce nothing. */
  | { state: 'done'; claim: Claim; ids: string[]; cursors: string[] };

/**
 * The prefix of a reservation's step ids: the key and its attempt 0 (never
 * changed after the insert), so a key reserved again after it expired never
 * reads the steps of the earlier reservation (swept later by expires_at).
 */
function stepsOf(key: IngestKeyDoc): string {
  return `${key._id}:${key.attempt}`;
}

/** Where a key stands: its newest step (0 is the reservation itself). */
type Top = { step: number; kind: 'attempt'; leaseUntil: Date } | { step: number; kind: 'released' } | { step: number; kind: 'done'; cursors: string[] };

/**
 * The record id of a key. A per-event key (`account` given) is scoped to the
 * account too; without it, the format request keys use, and event keys used
 * before they were per account.
 */
export function keyId(kind: IngestKeyDoc['kind'], token: string, key: string, account?: string): string {
  const scope = account === undefined ? '' : `${account}\0`;
  return createHash('sha256').update(`${kind}\0${createHash('sha256').update(token).digest('hex')}\0${scope}${key}`).digest('hex');
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

/** Test hook: runs after a retry read a key it may take over, before it inserts the takeover step. */
export const takeoverHooks: { beforeTakeover?: (keyId: string) => Promise<void> } = {};

const legacyWindows = new WeakMap<Collection<IngestKeyDoc>, Promise<number>>();

/**
 * Until when (ms) event keys of the earlier format (scoped to the token only)
 * may still exist: LEGACY_WINDOW_MS after the first process with per-account
 * keys used them, a time kept in `ingest_keys` (one unique insert, then read
 * once per process).
 */
function legacyUntil(keys: Collection<IngestKeyDoc>, now: Date): Promise<number> {
  let until = legacyWindows.get(keys);
  if (!until) {
    const markers = keys as unknown as Collection<{ _id: string; since: Date; expires_at: Date }>;
    until = (async () => {
      try {
        await markers.insertOne({ _id: LEGACY_MARKER, since: now, expires_at: new Date(8.64e15) });
        return now.getTime() + LEGACY_WINDOW_MS;
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
      }
      const marker = await markers.findOne({ _id: LEGACY_MARKER });
      return (marker?.since ?? now).getTime() + LEGACY_WINDOW_MS;
    })();
    legacyWindows.set(keys, until);
    until.catch(() => legacyWindows.delete(keys)); // asked again next time
  }
  return until;
}

export class IdempotencyKeys {
  private readonly steps: Collection<IngestKeyStepDoc>;

  constructor(
    private readonly keys: Collection<IngestKeyDoc>,
    /** How long a reservation is held by a running attempt before another may take it over. */
    private readonly leaseMs: number,
    private readonly clock: () => Date = () => new Date(),
  ) {
    this.steps = keys as unknown as Collection<IngestKeyStepDoc>;
  }

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
    await this.fail(ours).catch(() => undefined); // a lease that is not released runs out
    throw failed.reason;
  }

  /** True while every reservation's lease has `marginMs` left: an attempt produces only then. */
  held(reservations: Reservation[], marginMs: number): boolean {
    const now = this.clock().getTime();
    return reservations.every((r) => r.state === 'done' || r.leaseUntil.getTime() - marginMs > now);
  }

  /**
   * Stores the outcome (the step after ours). Answers the reservations whose
   * outcome a retry's takeover came before (our lease had run out): the
   * retry produces the same ids again, so our answer is still right.
   */
  async complete(reservations: Reservation[], cursorsOf: (r: Reservation) => string[]): Promise<Reservation[]> {
    const lost = await Promise.all(
      reservations.map(async (r) => (r.state === 'reserved' && !(await this.end(r, 'done', cursorsOf(r))) ? [r] : [])),
    );
    return lost.flat();
  }

  /** Releases the reservations of a failed attempt, keeping their ids for the retry (which may take over at once). */
  async fail(reservations: Reservation[]): Promise<void> {
    await Promise.all(reservations.map((r) => (r.state === 'reserved' ? this.end(r, 'released', null) : undefined)));
  }

  /** Inserts the step that ends our attempt; false when another step (a takeover) is there first. */
  private async end(r: Extract<Reservation, { state: 'reserved' }>, kind: 'done' | 'released', cursors: string[] | null): Promise<boolean> {
    try {
      await this.steps.insertOne({ _id: `${r.steps}:${r.step + 1}`, kind, attempt: null, lease_until: null, cursors, expires_at: r.expiresAt });
      return true;
    } catch (err) {
      if (isDuplicateKey(err)) return false;
      throw err;
    }
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
      if (claim.accountId !== undefined) fresh.account_id = claim.accountId;
      if (round === 0) {
        const legacy = await this.legacy(claim, size, now);
        if (legacy?.state === 'done' && legacy.cursors) return { state: 'done', claim, ids: legacy.ids, cursors: legacy.cursors };
        if (legacy) Object.assign(fresh, { ids: legacy.ids, created_at: legacy.created_at }); // its events may be on the topic: the same ids again
      }
      try {
        await this.keys.insertOne(fresh);
        return { state: 'reserved', claim, steps: stepsOf(fresh), attempt, step: 0, leaseUntil: lease, expiresAt: fresh.expires_at, ids: fresh.ids, createdAt: fresh.created_at };
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
      }
      const existing = await this.keys.findOne({ _id: claim._id });
      if (!existing) continue; // expired and removed meanwhile
      if (existing.expires_at <= now) {
        await this.keys.deleteOne({ _id: claim._id, attempt: existing.attempt, expires_at: existing.expires_at });
        continue; // its steps are named after its attempt 0: a new reservation starts with none
      }
      if (existing.body_hash !== claim.bodyHash || existing.ids.length !== size) throw reused(claim);
      const top = await this.top(existing);
      if (top.kind === 'done') return { state: 'done', claim, ids: existing.ids, cursors: top.cursors };
      if (top.kind === 'attempt' && top.leaseUntil > now) throw inProgress(claim, top.leaseUntil.getTime() - now.getTime());
      // A failed attempt, or one whose lease ran out: take the key over, with its ids, by inserting the next step.
      await takeoverHooks.beforeTakeover?.(claim._id);
      const step = top.step + 1;
      const steps = stepsOf(existing);
      try {
        await this.steps.insertOne({ _id: `${steps}:${step}`, kind: 'attempt', attempt, lease_until: lease, cursors: null, expires_at: existing.expires_at });
        return { state: 'reserved', claim, steps, attempt, step, leaseUntil: lease, expiresAt: existing.expires_at, ids: existing.ids, createdAt: existing.created_at };
      } catch (err) {
        if (!isDuplicateKey(err)) throw err;
      }
      // Another step came first (a retry's takeover, or the outcome): look again.
    }
    throw inProgress(claim, 1000);
  }

  /** The key's newest step, read step by step from the reservation (each by `_id`). */
  private async top(key: IngestKeyDoc): Promise<Top> {
    // Keys stored before steps existed kept their outcome and failures on the key itself.
    if (key.state === 'done' && key.cursors) return { step: 0, kind: 'done', cursors: key.cursors };
    let top: Top = key.state === 'failed' ? { step: 0, kind: 'released' } : { step: 0, kind: 'attempt', leaseUntil: key.lease_until };
    for (;;) {
      const next: IngestKeyStepDoc | null = await this.steps.findOne({ _id: `${stepsOf(key)}:${top.step + 1}` });
      if (!next) return top;
      const step: number = top.step + 1;
      if (next.kind === 'done') return { step, kind: 'done', cursors: next.cursors ?? [] };
      top = next.kind === 'released' ? { step, kind: 'released' } : { step, kind: 'attempt', leaseUntil: next.lease_until ?? new Date(0) };
    }
  }

  /**
   * An event key stored before keys were per account, under the earlier
   * format: read only while such keys can exist. Its body (the event,
   * account_id included) must match: it is then this account's key.
   */
  private async legacy(claim: Claim, size: number, now: Date): Promise<IngestKeyDoc | null> {
    if (claim.legacyId === undefined || now.getTime() >= (await legacyUntil(this.keys, now))) return null;
    const old = await this.keys.findOne({ _id: claim.legacyId });
    if (!old || old.expires_at <= now || old.body_hash !== claim.bodyHash || old.ids.length !== size) return null;
    return old;
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
