import { encodeCursor } from '#shared/cursor.js';
import { unavailable, validationFailed } from '#shared/errors/index.js';
import { buildEnvelope } from '#shared/eventlog/envelope.js';
import type { EventEnvelope } from '#shared/eventlog/types.js';
import type { ApiDeps } from '../../deps.js';
import { liveStep, tracingLiveSteps } from '../../live/live-trace.js';
import { bodyHash, IdempotencyKeys, keyId, type Claim } from './idempotency.js';
import type { IngestEvent } from './schemas.js';

interface IngestResult {
  events: { id: string; cursor: string }[];
}

interface IngestOptions {
  /** The ingest token the request came with: idempotency keys are scoped to it (a per-event key to its account too). */
  token?: string;
  /** The request's Idempotency-Key header, checked. */
  requestKey?: string;
}

/** How long a running attempt holds its keys: past the produce timeout, with room for the outcome write. */
function leaseMs(deps: ApiDeps): number {
  return deps.config.events.produceTimeoutMs * 2 + 5000;
}

/**
 * Appends validated events to the log; resolves once Kafka has acknowledged
 * all of them. With idempotency keys (see idempotency.ts) a retry gets the
 * first attempt's ids and cursors, and an event is never stored twice.
 */
export async function ingestEvents(deps: ApiDeps, events: IngestEvent[], opts: IngestOptions = {}): Promise<IngestResult & { replayed: boolean }> {
  const claims = claimsOf(events, opts);
  if (claims.length === 0) return { ...(await produce(deps, events.map((e) => buildEnvelope(e, deps.clock())))), replayed: false };

  const keys = new IdempotencyKeys(deps.mongo.collections.ingestKeys, leaseMs(deps), deps.clock);
  const reservations = await keys.reserveAll(claims, (c) => c.indexes.length);
  // Each event: answered from a finished key, or produced (with its key's ids when it has one).
  const now = deps.clock();
  const answers: ({ id: string; cursor: string } | null)[] = events.map(() => null);
  const envelopes: (EventEnvelope | null)[] = events.map((e) => buildEnvelope(e, now));
  for (const r of reservations) {
    r.claim.indexes.forEach((index, k) => {
      if (r.state === 'done') {
        answers[index] = { id: r.ids[k]!, cursor: r.cursors[k]! };
        envelopes[index] = null;
      } else {
        envelopes[index] = { ...envelopes[index]!, id: r.ids[k]!, created_at: r.createdAt[k]! };
      }
    });
  }
  const toSend = envelopes.flatMap((e, index) => (e ? [{ e, index }] : []));
  if (toSend.length > 0) {
    let produced: IngestResult;
    try {
      // A lease that cannot outlast the produce may be taken over while it runs: produce nothing then.
      if (!keys.held(reservations, deps.config.events.produceTimeoutMs)) throw unavailable('Ingest (the idempotency key was held too long before producing)');
      produced = await produce(
        deps,
        toSend.map((s) => s.e),
      );
    } catch (err) {
      await keys.fail(reservations).catch(() => undefined); // a reservation not released expires after its lease
      throw err;
    }
    toSend.forEach((s, k) => (answers[s.index] = produced.events[k]!));
    try {
      const late = await keys.complete(reservations, (r) => r.claim.indexes.map((index) => answers[index]!.cursor));
      // A retry took these over after their lease: it produces the same ids, so this answer stands.
      if (late.length > 0) deps.log.warn({ keys: late.length }, 'an idempotency key was taken over before its outcome was stored; its retry writes the same event ids again');
    } catch (err) {
      // Kafka has the events: answer 202. A retry after the lease writes the same ids again (stored once).
      deps.log.warn({ err }, 'could not store the outcome of an idempotency key; a retry after its lease writes the same event ids again');
    }
  }
  return { events: answers as { id: string; cursor: string }[], replayed: toSend.length === 0 };
}

async function produce(deps: ApiDeps, envelopes: EventEnvelope[]): Promise<IngestResult> {
  const traced = tracingLiveSteps();
  if (traced) for (const e of envelopes) liveStep({ step: 'ingest.produce', data: e.data });
  const positions = await deps.events.producer.publish(envelopes);
  if (traced) for (const e of envelopes) liveStep({ step: 'ingest.produced', data: e.data });
  for (const e of envelopes) deps.metrics.eventsIngested.inc({ type: e.type });
  return { events: envelopes.map((e, i) => ({ id: e.id, cursor: encodeCursor(positions[i]!) })) };
}

/**
 * The header's key covers the whole request (its events may be of several
 * accounts: scoped to the token); without it, each event's own key covers
 * that event, scoped to the token and the event's account.
 */
function claimsOf(events: IngestEvent[], opts: IngestOptions): Claim[] {
  const token = opts.token ?? '';
  if (opts.requestKey !== undefined) {
    return [{ _id: keyId('request', token, opts.requestKey), kind: 'request', bodyHash: bodyHash(events), indexes: events.map((_, i) => i) }];
  }
  const claims: Claim[] = [];
  const seen = new Map<string, number>();
  events.forEach((e, i) => {
    if (e.idempotency_key === undefined) return;
    const first = seen.get(e.idempotency_key);
    if (first !== undefined) throw validationFailed([{ path: `events[${i}].idempotency_key`, message: `repeats the key of events[${first}] in the same request` }]);
    seen.set(e.idempotency_key, i);
    const legacyId = keyId('event', token, e.idempotency_key);
    claims.push({ _id: keyId('event', token, e.idempotency_key, e.account_id), kind: 'event', bodyHash: bodyHash(e), indexes: [i], accountId: e.account_id, legacyId });
  });
  return claims;
}
