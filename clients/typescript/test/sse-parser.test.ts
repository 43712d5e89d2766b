import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { EventPlatform, SseParser, type Transport } from '../src/index.js';

describe('client: the SSE parser', () => {
  it('frames events across arbitrary chunk boundaries, with \\n, \\r\\n or \\r line ends, skipping comments', () => {
    const text = 'retry: 3000\n\n: heartbeat\n\nid: c1_a\nevent: resume\ndata: {"cursor":"c1_a"}\n\nid: c1_b\r\nevent: call.ended\r\ndata: {"x":1}\r\n\r\nid:c1_c\revent:call.started\rdata:line1\rdata:line2\r\r';
    const expected = [
      { id: 'c1_a', event: 'resume', data: '{"cursor":"c1_a"}' },
      { id: 'c1_b', event: 'call.ended', data: '{"x":1}' },
      { id: 'c1_c', event: 'call.started', data: 'line1\nline2' },
    ];
    for (const size of [1, 2, 3, 7, text.length]) {
      const parser = new SseParser();
      const got = [];
      for (let i = 0; i < text.length; i += size) got.push(...parser.push(text.slice(i, i + size)));
      expect(got, `chunks of ${size}`).to.deep.equal(expected);
    }
  });
});

describe('client: events.listen falls back to long-poll where SSE cannot be used', () => {
  it('a stream route answering 404 (a proxy that does not pass it): long-polls with since, and tries SSE again later', async () => {
    const record = (n: number) => ({ id: `evt_${String(n).padStart(24, '0')}`, type: 'call.ended', created_at: '2026-01-01T00:00:00.000Z', data: { n }, cursor: `c1_${n}` });
    const waits: unknown[] = [];
    let streams = 0;
    const server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        const json = (status: number, value: unknown) => res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(value));
        if (req.url === '/api/v1/events/stream-token') return json(201, { token: 'svcst_x', expires_at: new Date(Date.now() + 120_000).toISOString(), stream_url: '/api/v1/events/stream?token=svcst_x' });
        if (req.url?.startsWith('/api/v1/events/stream')) {
          streams += 1;
          return res.writeHead(404, { 'content-type': 'text/html' }).end('<h1>Not Found</h1>');
        }
        if (req.url === '/api/v1/events/wait') {
          const parsed = JSON.parse(body) as { since?: string };
          waits.push(parsed);
          const next = parsed.since ? Number(parsed.since.slice(3)) + 1 : 1;
          return json(200, next <= 3 ? { event: record(next) } : { event: null, timed_out: true, cursor: parsed.since ?? null });
        }
        json(404, { error: { code: 'not_found', message: 'no' } });
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const client = new EventPlatform({ baseUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, apiKey: 'svc_x' });
      const transports: [Transport, string][] = [];
      const got: number[] = [];
      for await (const event of client.events.listen({ since: 'c1_0', sseRetryMs: 0, onTransport: (t, why) => transports.push([t, why]) })) {
        got.push(event.data.n as number);
        if (got.length === 3) break;
      }
      expect(got).to.deep.equal([1, 2, 3]);
      expect(waits.slice(0, 3)).to.deep.equal([{ timeout_ms: 25000, since: 'c1_0' }, { timeout_ms: 25000, since: 'c1_1' }, { timeout_ms: 25000, since: 'c1_2' }]);
      expect(transports[0]).to.deep.equal(['long-poll', '404 unknown']);
      // sseRetryMs 0: SSE is tried again before each long-poll.
      expect(streams).to.be.at.least(3);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
