import { expect } from 'chai';
import { createRequire } from 'node:module';
import { MongoBulkWriteError, MongoClientClosedError, MongoExpiredSessionError, MongoNetworkError, MongoServerError, MongoServerSelectionError, MongoWriteConcernError } from 'mongodb';
import { MONGO_UNAVAILABLE_CODES, isDependencyError, unavailableFrom } from './dependency.js';
import { AppError } from './index.js';

function errno(message: string, code: string): NodeJS.ErrnoException {
  return Object.assign(new Error(message), { code });
}

describe('isDependencyError', () => {
  it('recognises the MongoDB driver and kafkajs failures', () => {
    expect(isDependencyError(new MongoNetworkError('connection 1 closed'))).to.equal(true);
    expect(isDependencyError(new MongoServerSelectionError('no server', { type: 'Unknown', servers: new Map() } as never))).to.equal(true);
    expect(isDependencyError(Object.assign(new Error('retries exceeded'), { name: 'KafkaJSNumberOfRetriesExceeded' }))).to.equal(true);
  });

  it('treats operations cut off by this process closing its client (shutdown) as unavailable, not as bugs', () => {
    expect(isDependencyError(new MongoClientClosedError())).to.equal(true);
    expect(isDependencyError(new MongoExpiredSessionError())).to.equal(true);
  });

  it('recognises a bare socket error, as the driver throws when the server closes mid-write', () => {
    expect(isDependencyError(errno('This socket has been ended by the other party', 'EPIPE'))).to.equal(true);
    expect(isDependencyError(errno('connect ECONNREFUSED 127.0.0.1:27017', 'ECONNREFUSED'))).to.equal(true);
    expect(isDependencyError(new Error('write failed', { cause: errno('reset', 'ECONNRESET') }))).to.equal(true);
  });

  it('leaves bugs, client aborts and non-errors alone', () => {
    expect(isDependencyError(new TypeError('x is undefined'))).to.equal(false);
    expect(isDependencyError(errno('no such file', 'ENOENT'))).to.equal(false);
    // raw-body's "request aborted": the client left; it stays a 4xx, not a 503.
    expect(isDependencyError(Object.assign(errno('request aborted', 'ECONNABORTED'), { status: 400, type: 'request.aborted' }))).to.equal(false);
    expect(isDependencyError('EPIPE')).to.equal(false);
  });
});

/** A server's answer as the driver raises it: `{ok: 0, code, codeName, errmsg}`. */
function serverError(code: number, codeName: string, errorLabels?: string[]): MongoServerError {
  return new MongoServerError({ ok: 0, code, codeName, errmsg: `${codeName} (from the server)`, ...(errorLabels ? { errorLabels } : {}) });
}

describe('MongoDB shutdown and failover answers', () => {
  const unavailable: [number, string][] = [
    [11600, 'InterruptedAtShutdown'],
    [91, 'ShutdownInProgress'],
    [189, 'PrimarySteppedDown'],
    [10107, 'NotWritablePrimary'],
    [11602, 'InterruptedDueToReplStateChange'],
    [13435, 'NotPrimaryNoSecondaryOk'],
    [13436, 'NotPrimaryOrSecondary'],
    [10058, 'LegacyNotPrimary'],
    [6, 'HostUnreachable'],
    [7, 'HostNotFound'],
    [89, 'NetworkTimeout'],
    [9001, 'SocketException'],
    [262, 'ExceededTimeLimit'],
    [134, 'ReadConcernMajorityNotAvailableYet'],
  ];

  it('map to 503 "Storage is unavailable" by code', () => {
    for (const [code, name] of unavailable) {
      const mapped = unavailableFrom(serverError(code, name));
      expect(mapped, name).to.include({ status: 503, code: 'unavailable', message: 'Storage is unavailable, try again shortly' });
    }
  });

  it('also when the code is that of a write concern error (the primary shut down before confirming a journaled write)', () => {
    const err = new MongoWriteConcernError({ writeConcernError: { code: 91, codeName: 'ShutdownInProgress', errmsg: 'shutting down' } } as never);
    expect(isDependencyError(err)).to.equal(true);
  });

  it('also by the label the server or driver puts on a retryable error, whatever the code', () => {
    expect(isDependencyError(serverError(1, 'InternalError', ['RetryableWriteError']))).to.equal(true);
    expect(isDependencyError(serverError(1, 'InternalError', ['SystemOverloadedError']))).to.equal(true);
  });

  it('leave answers about the request itself alone: a duplicate key, a bad query, a document too large stay 500s', () => {
    for (const [code, name] of [[11000, 'DuplicateKey'], [2, 'BadValue'], [10334, 'BSONObjectTooLarge'], [121, 'DocumentValidationFailure'], [50, 'MaxTimeMSExpired']] as const) {
      expect(isDependencyError(serverError(code, name)), name).to.equal(false);
    }
    // The same code on an error that is not the driver's is not MongoDB's.
    expect(isDependencyError(Object.assign(new Error('x'), { code: 91 }))).to.equal(false);
    const bulk = new MongoBulkWriteError({ message: 'dup', code: 11000, writeErrors: [] } as never, { insertedCount: 0 } as never);
    expect(isDependencyError(bulk)).to.equal(false);
  });

  it("cover every code the installed driver retries a read or write on (its own list, internal to it)", () => {
    // The driver keeps these lists internal; its error module says which codes it retries.
    const driver = createRequire(import.meta.url)('mongodb/lib/error.js') as {
      MONGODB_ERROR_CODES: Record<string, number>;
      isRetryableReadError(err: unknown): boolean;
    };
    const retried = Object.values(driver.MONGODB_ERROR_CODES).filter((code) => driver.isRetryableReadError(serverError(code, 'x')));
    expect(retried.length).to.be.greaterThan(10);
    for (const code of retried) expect(MONGO_UNAVAILABLE_CODES.has(code), `code ${code}`).to.equal(true);
  });
});

describe('unavailableFrom', () => {
  it('turns a dependency failure into a 503 with Retry-After naming the dependency, and nothing else', () => {
    const cases: [unknown, string][] = [
      [new MongoNetworkError('connection 1 closed'), 'Storage is unavailable, try again shortly'],
      [Object.assign(new Error('retries exceeded'), { name: 'KafkaJSNumberOfRetriesExceeded' }), 'The event log is unavailable, try again shortly'],
      [errno('ended', 'EPIPE'), 'A backing service is unavailable, try again shortly'],
    ];
    for (const [err, message] of cases) {
      const mapped = unavailableFrom(err);
      expect(mapped).to.be.instanceOf(AppError);
      expect(mapped).to.include({ code: 'unavailable', status: 503, message });
      expect(mapped!.headers['Retry-After']).to.match(/^\d+$/);
    }
    expect(unavailableFrom(new TypeError('bug'))).to.equal(null);
    expect(unavailableFrom(new AppError('not_found', 'x'))).to.equal(null);
  });
});
