/**
 * Where a live event's latency goes, step by step, for the bench (opt-in):
 * each step on the path from the ingest request to a reader's socket is
 * published on the diagnostics channel `event-platform.live.step` with the
 * time it was reached (performance.timeOrigin + performance.now(), ms). With
 * no subscriber (always, outside the bench's probe) a step costs one property
 * read: nothing is built or published.
 *
 * Steps: `ingest.start` (the ingest handler runs), `ingest.produced` (Kafka
 * acknowledged), `fanout.batch` (the fan-out consumer has the record),
 * `fanout.dispatched` (its waiters were offered it; a long-poll is written in
 * that same call), `longpoll.written`, `sse.written`.
 */
import { channel } from 'node:diagnostics_channel';

const STEPS = channel('event-platform.live.step');

/** A step reached by one event: `data` is its record's data, or the raw record value (Buffer). */
export interface LiveStep {
  step: string;
  at: number;
  data?: unknown;
  value?: Buffer | null;
  /** The Kafka record's timestamp (the producer's send time), for `fanout.batch`. */
  kafkaTs?: number;
}

/** True while something listens: the caller builds a step only then. */
export function tracingLiveSteps(): boolean {
  return STEPS.hasSubscribers;
}

export function liveStep(step: Omit<LiveStep, 'at'>): void {
  STEPS.publish({ ...step, at: performance.timeOrigin + performance.now() });
}
