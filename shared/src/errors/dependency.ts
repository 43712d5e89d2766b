import { MongoError, MongoErrorLabel } from 'mongodb';
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
 * MongoDB's answers that mean "this server cannot serve you now, try again":
 * it is shutting down, stepping down or failing over, or not reachable from
 * the node that answered. These are the retryable-error codes of the
 * driver's retryable reads and writes specification (the driver keeps them
 * internal; `dependency.test.ts` checks this list against the installed
 * driver's), and the legacy "not primary" code. FerretDB only ever drops the
 * connection, so only a real MongoDB sends them.
 */
export const MONGO_UNAVAILABLE_CODES: ReadonlySet<number> = new Set([
  6, // HostUnreachable
  7, // HostNotFound
  89, // NetworkTimeout
  91, // ShutdownInProgress
  134, // ReadConcernMajorityNotAvailableYet
  189, // PrimarySteppedDown
  262, // ExceededTimeLimit
  9001, // SocketException
  10058, // LegacyNotPrimary
  10107, // NotWritablePrimary
  11600, // InterruptedAtShutdown
  11602, // InterruptedDueToReplStateChange
  13435, // NotPrimaryNoSecondaryOk
  13436, // NotPrimaryOrSecondary
]);

/** Labels the server or the driver puts on an error that a retry elsewhere or later would not get. */
const MONGO_UNAVAILABLE_LABELS = [MongoErrorLabel.RetryableWriteError, MongoErrorLabel.ResetPool, MongoErrorLabel.SystemOverloadedError];

/** By code (a write concern error carries the code of why the write could not be confirmed) or by label. */
function isMongoUnavailable(err: Error): boolean {
  if (!(err instanceof MongoError)) return false;
  return MONGO_UNAVAILABLE_CODES.has(Number(err.code)) || MONGO_UNAVAILABLE_LABELS.some((label) => err.hasErrorLabel(label));
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
  if (isMongoUnavailable(err)) return true;
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
