import { pino, type Logger } from 'pino';
import { activeSpanIds } from './telemetry.js';

export type { Logger } from 'pino';

const NONE = Object.freeze({});

/**
 * Structured JSON logs on stdout, one object per line. A line written inside a
 * recorded span (tracing on: shared/src/telemetry.ts) carries its `trace_id`
 * and `span_id`.
 */
export function createLogger(name: string, level: string): Logger {
  return pino({ name, level, base: { process: name }, timestamp: pino.stdTimeFunctions.isoTime, mixin: () => activeSpanIds() ?? NONE });
}
