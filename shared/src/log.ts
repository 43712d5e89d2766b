import { pino, type DestinationStream, type Logger } from 'pino';
import { activeSpanIds, tracingOn } from './telemetry.js';

export type { Logger } from 'pino';

/**
 * Structured JSON logs on stdout, one object per line. With tracing on when the
 * logger is made (shared/src/telemetry.ts: runProcess starts it first), a line
 * written inside a recorded span carries its `trace_id` and `span_id`; off, no
 * mixin runs at all. `destination`: stdout unless given (tests read the lines).
 */
export function createLogger(name: string, level: string, destination?: DestinationStream): Logger {
  const options = { name, level, base: { process: name }, timestamp: pino.stdTimeFunctions.isoTime, ...(tracingOn() ? { mixin: () => activeSpanIds() ?? {} } : {}) };
  return destination ? pino(options, destination) : pino(options);
}
