import { encodeCursor } from '../../../../shared/src/cursor.js';
import { asUnavailable } from '../../../../shared/src/errors/dependency.js';
import { buildEnvelope } from '../../../../shared/src/eventlog/envelope.js';
import type { ApiDeps } from '../../deps.js';
import type { IngestEvent } from './schemas.js';

export interface IngestResult {
  events: { id: string; cursor: string }[];
}

/** Appends validated events to the log; resolves once Kafka has acknowledged all of them. */
export async function ingestEvents(deps: ApiDeps, events: IngestEvent[]): Promise<IngestResult> {
  const now = deps.clock();
  const envelopes = events.map((e) => buildEnvelope(e, now));
  let positions;
  try {
    positions = await deps.events.log.publish(envelopes);
  } catch (err) {
    throw asUnavailable(err, 'The event log');
  }
  for (const e of envelopes) deps.metrics.eventsIngested.inc({ type: e.type });
  return { events: envelopes.map((e, i) => ({ id: e.id, cursor: encodeCursor(positions[i]!) })) };
}
