import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { startTestApi } from './support/api.js';

/** The accept-queue limit the kernel reports for the listening socket on `port` (ss's Send-Q of a LISTEN socket). */
function listenBacklog(port: number): number {
  const out = execFileSync('ss', ['-Hltn', `sport = :${port}`], { encoding: 'utf8' }).trim();
  const sendQ = out.split(/\s+/)[2];
  if (!sendQ) throw new Error(`no listening socket on port ${port} in: ${out}`);
  return Number(sendQ);
}

describe('listen backlog (HTTP_LISTEN_BACKLOG)', () => {
  it('listens with the configured backlog, not Node 511 (13,000 readers connecting at once overflowed it: resets and stalled connects)', async () => {
    const somaxconn = Number(readFileSync('/proc/sys/net/core/somaxconn', 'utf8'));
    const api = await startTestApi({ HTTP_LISTEN_BACKLOG: '1000' });
    expect(listenBacklog(Number(new URL(api.url).port))).to.equal(Math.min(1000, somaxconn));
  });
});
