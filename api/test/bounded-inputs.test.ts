import net from 'node:net';
import { expect } from 'chai';
import type { RunningApi } from '../src/server.js';
import { bearer, createAccount } from './support/accounts.js';
import { call, startTestApi } from './support/api.js';

/**
 * Sends `head` at once, then `trickle` one byte every `everyMs` for as long
 * as the server keeps the connection; resolves with what the server answered
 * and how long it kept the connection.
 */
function slowClient(base: string, head: string, trickle: string, everyMs: number): Promise<{ answer: string; ms: number; sentAll: boolean }> {
  const url = new URL(base);
  const started = Date.now();
  return new Promise((resolve, reject) => {
    let answer = '';
    let sent = 0;
    let timer: NodeJS.Timeout | undefined;
    const socket = net.connect(Number(url.port), url.hostname, () => {
      socket.write(head);
      timer = setInterval(() => {
        if (sent >= trickle.length) return clearInterval(timer);
        if (socket.writable) socket.write(trickle[sent++]!);
      }, everyMs);
    });
    socket.on('data', (d) => (answer += d.toString('latin1')));
    socket.on('error', () => undefined); // a reset is an answer too
    socket.on('close', () => {
      clearInterval(timer);
      resolve({ answer, ms: Date.now() - started, sentAll: sent >= trickle.length });
    });
    setTimeout(() => {
      socket.destroy();
      reject(new Error(`the server still held the slow connection after 20 s (answered: ${JSON.stringify(answer)})`));
    }, 20_000).unref();
  });
}

/** Windows are clock-aligned: make sure the next `room` seconds stay in one window. */
async function roomInWindow(seconds: number, room: number): Promise<void> {
  const left = seconds * 1000 - (Date.now() % (seconds * 1000));
  if (left < room * 1000) await new Promise((r) => setTimeout(r, left + 50));
}

async function until(check: () => boolean, ms: number, what: string): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('bounded inputs', function () {
  this.timeout(120_000);

  describe('request timeouts (HTTP_REQUEST_TIMEOUT_MS=1500, HTTP_HEADERS_TIMEOUT_MS=1000 here; 30 s and 20 s by default)', () => {
    let api: RunningApi;

    before(async () => {
      api = await startTestApi({ HTTP_REQUEST_TIMEOUT_MS: '1500', HTTP_HEADERS_TIMEOUT_MS: '1000', STREAM_DURATION_MS: '5000', STREAM_HEARTBEAT_MS: '1000' });
    });

    it('cuts a body that trickles in (slowloris) with 408, long before it is complete', async () => {
      const body = JSON.stringify({ email: 'slow@example.com', password: 'x'.repeat(100) });
      const head = `POST /api/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;
      const res = await slowClient(api.url, head, body, 200);
      expect(res.sentAll).to.equal(false);
      expect(res.answer).to.match(/^HTTP\/1\.1 408 /);
      expect(res.answer).to.include('"code":"request_timeout"');
      expect(res.ms).to.be.below(body.length * 200);
    });

    it('cuts headers that trickle in with 408', async () => {
      const res = await slowClient(api.url, 'GET /healthz HTTP/1.1\r\n', `Host: x\r\nX-Slow: ${'y'.repeat(200)}\r\n\r\n`, 200);
      expect(res.sentAll).to.equal(false);
      expect(res.answer).to.match(/^HTTP\/1\.1 408 /);
    });

    it('does not count the idle time of a keep-alive connection between two requests', async () => {
      const url = new URL(api.url);
      const socket = net.connect(Number(url.port), url.hostname);
      let text = '';
      socket.on('data', (d) => (text += d.toString('latin1')));
      const request = 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n';
      socket.write(request);
      await until(() => (text.match(/HTTP\/1\.1 /g) ?? []).length === 1 && text.includes('}'), 5000, 'the first answer');
      await new Promise((r) => setTimeout(r, 2500)); // idle longer than both timeouts
      socket.write(request);
      await until(() => (text.match(/HTTP\/1\.1 /g) ?? []).length === 2, 5000, 'the second answer');
      socket.destroy();
      expect(text.match(/HTTP\/1\.1 \d+/g)).to.deep.equal(['HTTP/1.1 200', 'HTTP/1.1 200']);
    });

    it('does not cut a long-poll that waits longer than the request timeout (the request was in; only the answer takes long)', async () => {
      const acct = await createAccount(api.url);
      const started = Date.now();
      const res = await call(api.url, 'POST', '/api/v1/events/wait', { headers: bearer(acct.apiKey), body: { timeout_ms: 5000 } });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      expect(res.body).to.include({ event: null, timed_out: true });
      expect(Date.now() - started).to.be.at.least(4900);
    });

    it('does not cut a stream that runs longer than the request timeout', async () => {
      const acct = await createAccount(api.url);
      const minted = await call(api.url, 'POST', '/api/v1/events/stream-token', { headers: bearer(acct.apiKey) });
      const started = Date.now();
      const res = await fetch(new URL(minted.body.stream_url, api.url));
      expect(res.status).to.equal(200);
      const text = await res.text(); // to the server's own end of the stream, after STREAM_DURATION_MS
      expect(Date.now() - started).to.be.at.least(4900);
      expect(text.startsWith('retry: ')).to.equal(true);
    });
  });

  describe('long-polls per account (MAX_LONG_POLLS_PER_ACCOUNT=2 here; 50 by default)', () => {
    let api: RunningApi;

    before(async () => {
      api = await startTestApi({ MAX_LONG_POLLS_PER_ACCOUNT: '2' });
    });

    it('answers the long-poll over the cap with 429 naming the cap, and frees the slot when a long-poll ends', async () => {
      const acct = await createAccount(api.url);
      const other = await createAccount(api.url);
      const aborts = [new AbortController(), new AbortController()];
      const open = aborts.map((abort) =>
        fetch(`${api.url}/api/v1/events/wait`, { method: 'POST', headers: { ...bearer(acct.apiKey), 'content-type': 'application/json' }, body: JSON.stringify({ timeout_ms: 30_000 }), signal: abort.signal }).catch(() => null),
      );
      await until(() => api.deps.held.longPolls.held(acct.userId) === 2, 10_000, 'two long-polls held');

      const refused = await call(api.url, 'POST', '/api/v1/events/wait', { headers: bearer(acct.apiKey), body: { timeout_ms: 1000 } });
      expect(refused.status).to.equal(429);
      expect(refused.body.error.code).to.equal('rate_limited');
      expect(refused.body.error.message).to.match(/at most 2 at once per API process/);
      expect(refused.headers.get('retry-after')).to.equal('1');
      expect(api.deps.held.longPolls.held(acct.userId)).to.equal(2);

      // Another account is not affected.
      const theirs = await call(api.url, 'POST', '/api/v1/events/wait', { headers: bearer(other.apiKey), body: { timeout_ms: 1000 } });
      expect(theirs.status).to.equal(200);

      aborts[0]!.abort();
      await until(() => api.deps.held.longPolls.held(acct.userId) === 1, 10_000, 'the abandoned long-poll to be released');
      const again = await call(api.url, 'POST', '/api/v1/events/wait', { headers: bearer(acct.apiKey), body: { timeout_ms: 1000 } });
      expect(again.status).to.equal(200);
      aborts[1]!.abort();
      await Promise.all(open);
      await until(() => api.deps.held.longPolls.held(acct.userId) === 0, 10_000, 'every slot to be released');
    });
  });

  describe('stream opens spend the account rate limit', () => {
    it('answers a stream open over the budget with 429 and Retry-After', async () => {
      const api = await startTestApi({ API_KEY_LIMIT_PER_MINUTE: '4' });
      const acct = await createAccount(api.url);
      await roomInWindow(60, 20);
      // 1: the mint. 2, 3, 4: three opens. 5: over.
      const minted = await call(api.url, 'POST', '/api/v1/events/stream-token', { headers: bearer(acct.apiKey) });
      expect(minted.status).to.equal(201);
      const url = new URL(minted.body.stream_url, api.url);
      for (let i = 0; i < 3; i++) {
        const abort = new AbortController();
        const res = await fetch(url, { signal: abort.signal });
        expect(res.status, `open ${i + 1}`).to.equal(200);
        expect(res.headers.get('ratelimit-remaining')).to.equal(String(2 - i));
        abort.abort();
      }
      const over = await fetch(url);
      expect(over.status).to.equal(429);
      expect(Number(over.headers.get('retry-after'))).to.be.within(1, 60);
      expect(((await over.json()) as { error: { code: string } }).error.code).to.equal('rate_limited');
    });
  });
});
