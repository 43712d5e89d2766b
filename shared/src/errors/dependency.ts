import { AppError, unavailable } from './index.js';

/**
 * Socket-level failures. The API's only network peers are Kafka and MongoDB,
 * so one of these means a dependency went away. The MongoDB driver usually
 * wraps them in a MongoNetworkError, but not always: a server that closes
 * its end while a command is being written surfaces as a bare EPIPE
 * ("This socket has been ended by the other party"; seen in the fault tests
 * when the MongoDB server stops).
 */
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENETDOWN', 'ECONNABORTED', 'ERR_SOCKET_CLOSED', 'ERR_STREAM_WRITE_AFTER_END']);

function isNetworkError(err: Error): boolean {
  // An http-errors error (a client that went away while its body was read) is about the client.
  if ('status' in err || 'statusCode' in err) return false;
  const code = (err as NodeJS.ErrnoException).code;
  return typeof code === 'string' && NETWORK_CODES.has(code);
}

/**
 * True for errors that mean a dependency (Kafka, MongoDB) is unreachable or
 * timed out, as opposed to a bug. Those become 503 with Retry-After.
 */
export function isDependencyError(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const name = err.name ?? '';
  // ClientClosed / ExpiredSession: requests still running while this process shuts down and closes its client.
  if (/^Mongo(ServerSelection|Network|NetworkTimeout|Topology|PoolCleared|NotConnected|ClientClosed|ExpiredSession)/.test(name)) return true;
  if (name.startsWith('Kafka')) return true;
  if (isNetworkError(err)) return true;
  return err.cause instanceof Error && err.cause !== err && isNetworkError(err.cause);
}

/** The dependency an error comes from, as a client may read it: the store (MongoDB), the event log (Kafka), or either. */
function dependencyName(err: Error): string {
  if (err.name.startsWith('Mongo')) return 'Storage';
  if (err.name.startsWith('Kafka')) return 'The event log';
  return 'A backing service';
}

/**
 * The one place a dependency failure becomes an answer: a 503 with
 * Retry-After whose message names the dependency from the error itself
 * (MongoDB is "Storage", Kafka "The event log", a bare socket error "A
 * backing service"). Null for anything else (a bug stays a 500). The
 * services throw driver errors as they come; the error middleware and the
 * MCP layer call this, so no call site wraps its own.
 */
export function unavailableFrom(err: unknown): AppError | null {
  return isDependencyError(err) ? unavailable(dependencyName(err as Error)) : null;
}
