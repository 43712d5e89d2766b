import { pino, type Logger } from 'pino';

export type { Logger } from 'pino';

/** Structured JSON logs on stdout, one object per line. */
export function createLogger(name: string, level: string): Logger {
  return pino({ name, level, base: { process: name }, timestamp: pino.stdTimeFunctions.isoTime });
}
