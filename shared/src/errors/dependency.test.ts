import { expect } from 'chai';
import { MongoClientClosedError, MongoExpiredSessionError, MongoNetworkError, MongoServerSelectionError } from 'mongodb';
import { isDependencyError, unavailableFrom } from './dependency.js';
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
