import { AppError, unavailable } from './index.js';

/**
 * True for errors that mean a dependency (Kafka, MongoDB) is unreachable or
 * timed out, as opposed to a bug. Those become 503 with Retry-After.
 */
export function isDependencyError(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const name = err.name ?? '';
  if (/^Mongo(ServerSelection|Network|NetworkTimeout|Topology|PoolCleared|NotConnected)/.test(name)) return true;
  if (name.startsWith('Kafka')) return true;
  return false;
}

/** Re-throws dependency failures as a 503 AppError; everything else unchanged. */
export function asUnavailable(err: unknown, what: string): unknown {
  if (err instanceof AppError) return err;
  return isDependencyError(err) ? unavailable(what) : err;
}
