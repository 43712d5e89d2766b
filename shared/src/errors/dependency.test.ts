import { expect } from 'chai';
import { MongoClientClosedError, MongoExpiredSessionError, MongoNetworkError, MongoServerSelectionError } from 'mongodb';
import { asUnavailable, isDependencyError } from './dependency.js';
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

describe('asUnavailable', () => {
  it('turns a dependency failure into a 503 with Retry-After and keeps everything else', () => {
    const mapped = asUnavailable(errno('ended', 'EPIPE'), 'Event storage');
    expect(mapped).to.be.instanceOf(AppError);
    expect((mapped as AppError).status).to.equal(503);
    expect((mapped as AppError).headers['Retry-After']).to.match(/^\d+$/);
    const bug = new TypeError('bug');
    expect(asUnavailable(bug, 'Event storage')).to.equal(bug);
  });
});
