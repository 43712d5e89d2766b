import { expect } from 'chai';
import { loadDeliveryConfig } from './config.js';
import { DEFAULT_SCHEDULE, giveUpReason, isPermanentFailure, JITTER, nextDelay, parseRetryAfter, parseSchedule } from './retry-policy.js';

describe('retry policy', () => {
  const none = { status: 500, retryAfterMs: null };
  const mid = () => 0.5;

  it('follows 5s, 5m, 30m, 2h, 5h, 10h, 14h and then gives up', () => {
    const delays = [1, 2, 3, 4, 5, 6, 7, 8].map((n) => nextDelay(n, DEFAULT_SCHEDULE, none, mid));
    expect(delays).to.deep.equal([5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 50_400_000, null]);
  });

  it('keeps retrying for more than 24 hours even when every delay is jittered as short as it can be, and for at most 40', () => {
    const horizon = (random: () => number) => DEFAULT_SCHEDULE.reduce((sum, _, i) => sum + (nextDelay(i + 1, DEFAULT_SCHEDULE, none, random) as number), 0);
    const HOUR = 3_600_000;
    expect(horizon(() => 0)).to.be.above(24 * HOUR);
    expect(horizon(() => 0.999999)).to.be.below(40 * HOUR);
    expect(horizon(mid)).to.be.within(31 * HOUR, 32 * HOUR);
  });

  it('jitters every step of the default schedule within 20 percent either way, and not all alike', () => {
    expect(JITTER).to.equal(0.2);
    let seed = 7;
    const random = () => ((seed = (seed * 16807) % 2147483647) - 1) / 2147483646; // deterministic, in [0, 1)
    DEFAULT_SCHEDULE.forEach((step, i) => {
      const seen = new Set<number>();
      for (let k = 0; k < 200; k++) {
        const d = nextDelay(i + 1, DEFAULT_SCHEDULE, none, random) as number;
        expect(d, `step ${i + 1}`).to.be.within(Math.floor(step * 0.8), Math.ceil(step * 1.2));
        seen.add(d);
      }
      expect(seen.size, `step ${i + 1} is jittered`).to.be.above(100);
    });
  });

  it('names why a delivery was given up: a permanent failure, or the schedule ran out', () => {
    expect(giveUpReason({ outcome: 'http_4xx', status: 410, error: null })).to.equal('permanent');
    expect(giveUpReason({ outcome: 'blocked_address', status: null, error: 'private' })).to.equal('permanent');
    expect(giveUpReason({ outcome: 'http_5xx', status: 500, error: null })).to.equal('exhausted');
    expect(giveUpReason({ outcome: 'timeout', status: null, error: 'timed out' })).to.equal('exhausted');
  });

  it('jitters each step by at most 20 percent either way', () => {
    expect(nextDelay(1, DEFAULT_SCHEDULE, none, () => 0)).to.equal(4_000);
    expect(nextDelay(1, DEFAULT_SCHEDULE, none, () => 0.999999)).to.be.within(5_999, 6_000);
  });

  it('honours Retry-After on 429 and 503 between the schedule step and one hour', () => {
    expect(nextDelay(1, DEFAULT_SCHEDULE, { status: 429, retryAfterMs: 120_000 }, mid)).to.equal(120_000);
    expect(nextDelay(1, DEFAULT_SCHEDULE, { status: 503, retryAfterMs: 1_000 }, mid)).to.equal(5_000);
    expect(nextDelay(1, DEFAULT_SCHEDULE, { status: 429, retryAfterMs: 86_400_000 }, mid)).to.equal(3_600_000);
    expect(nextDelay(1, DEFAULT_SCHEDULE, { status: 500, retryAfterMs: 120_000 }, mid)).to.equal(5_000);
    expect(nextDelay(8, DEFAULT_SCHEDULE, { status: 429, retryAfterMs: 1_000 }, mid)).to.equal(null);
  });

  it('reads Retry-After as seconds or as an HTTP date', () => {
    const now = new Date('2026-01-01T00:00:00Z');
    expect(parseRetryAfter('120', now)).to.equal(120_000);
    expect(parseRetryAfter('Thu, 01 Jan 2026 00:00:30 GMT', now)).to.equal(30_000);
    expect(parseRetryAfter('soon', now)).to.equal(null);
    expect(parseRetryAfter(undefined, now)).to.equal(null);
  });

  it('parses a configured schedule and names a bad step', () => {
    expect(parseSchedule('1s, 1s,2s,500ms,2m,1h')).to.deep.equal([1000, 1000, 2000, 500, 120_000, 3_600_000]);
    expect(() => parseSchedule('1s,soon')).to.throw(/bad duration "soon"/);
    expect(() => loadDeliveryConfig({ NODE_ENV: 'development', WEBHOOK_RETRY_SCHEDULE: '5x' })).to.throw(/WEBHOOK_RETRY_SCHEDULE has a bad duration/);
    expect(loadDeliveryConfig({ NODE_ENV: 'development', WEBHOOK_RETRY_SCHEDULE: '1s,2s' }).webhooks.retrySchedule).to.deep.equal([1000, 2000]);
  });

  it('refuses an unreadable CA file and a lease shorter than two attempts', () => {
    expect(() => loadDeliveryConfig({ NODE_ENV: 'development', WEBHOOK_CA_FILE: '/nonexistent/ca.pem' })).to.throw(/WEBHOOK_CA_FILE cannot be read/);
    expect(() => loadDeliveryConfig({ NODE_ENV: 'development', WEBHOOK_LEASE_MS: '1000' })).to.throw(/WEBHOOK_LEASE_MS must be between 8000/);
  });

  it('names the permanent failures: a blocked address, a certificate for another name or nobody trusted, a 410', () => {
    const f = (outcome: string, status: number | null, error: string | null = null) => isPermanentFailure({ outcome: outcome as never, status, error });
    expect(f('blocked_address', null, '10.0.0.1 is a private address')).to.equal(true);
    expect(f('tls', null, "ERR_TLS_CERT_ALTNAME_INVALID: Hostname/IP does not match certificate's altnames")).to.equal(true);
    expect(f('tls', null, 'DEPTH_ZERO_SELF_SIGNED_CERT: self-signed certificate')).to.equal(true);
    expect(f('tls', null, 'UNABLE_TO_VERIFY_LEAF_SIGNATURE: unable to verify the first certificate')).to.equal(true);
    expect(f('http_4xx', 410)).to.equal(true);
    // Retried: the receiver can recover within the schedule.
    expect(f('tls', null, 'CERT_HAS_EXPIRED: certificate has expired')).to.equal(false);
    expect(f('tls', null, 'EPROTO: handshake failure')).to.equal(false);
    for (const [outcome, status] of [['http_4xx', 404], ['http_4xx', 429], ['http_5xx', 500], ['http_3xx', 301], ['timeout', null], ['connect', null], ['dns', null]] as const) {
      expect(f(outcome, status), `${outcome} ${status}`).to.equal(false);
    }
  });
});
