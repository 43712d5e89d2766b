import { AppError } from './errors/index.js';

/**
 * A cursor is an event's position in the log: its Kafka partition and offset.
 * All of one account's events sit in one partition, so the offset orders them.
 * Clients see it as an opaque string; polling, long-poll and SSE ids all use it.
 */
export interface Position {
  partition: number;
  offset: bigint;
}

const PREFIX = 'c1_';

export function encodeCursor(pos: Position): string {
  return PREFIX + Buffer.from(`${pos.partition}.${pos.offset.toString()}`).toString('base64url');
}

/** Returns null for anything that is not a cursor this service issued. */
export function tryDecodeCursor(raw: string): Position | null {
  if (typeof raw !== 'string' || !raw.startsWith(PREFIX) || raw.length > 64) return null;
  const text = Buffer.from(raw.slice(PREFIX.length), 'base64url').toString('utf8');
  const match = /^(\d{1,4})\.(\d{1,19})$/.exec(text);
  if (!match) return null;
  const pos = { partition: Number(match[1]), offset: BigInt(match[2] as string) };
  // Re-encoding must give the same string, so two spellings never name one position.
  return encodeCursor(pos) === raw ? pos : null;
}

export function decodeCursor(raw: string, field = 'since'): Position {
  const pos = tryDecodeCursor(raw);
  if (!pos) throw new AppError('validation_failed', `${field} is not a valid cursor`, [{ path: field, message: 'malformed cursor' }]);
  return pos;
}
