import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import type { EventRecord } from '#shared/eventlog/types.js';
import { SseWriter } from './sse.js';

const record = { id: 'evt_1', account_id: 'acc_1', type: 'message.received', created_at: '2026-01-01T00:00:00.000Z', cursor: 'c1', data: { n: 1 } } as unknown as EventRecord;

/** A real response on a loopback socket, opened as an SSE stream; the client's bytes are collected. */
async function openStream(): Promise<{ sse: SseWriter; res: http.ServerResponse; received: () => string; close: () => Promise<void> }> {
  let serverRes!: http.ServerResponse;
  const server = http.createServer((_req, res) => (serverRes = res));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  let text = '';
  const client = http.get(`http://127.0.0.1:${(server.address() as AddressInfo).port}/`);
  const opened = new Promise<void>((resolve) =>
    client.on('response', (res) => {
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      resolve();
    }),
  );
  while (!serverRes) await new Promise((resolve) => setTimeout(resolve, 5));
  const sse = new SseWriter(serverRes);
  sse.open({}, 1000);
  await opened;
  return {
    sse,
    res: serverRes,
    received: () => text,
    close: async () => {
      client.destroy();
      serverRes.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

describe('SSE writer', () => {
  it('hands an event to the socket in the same call, not on a later tick, from a microtask too', async () => {
    const s = await openStream();
    try {
      const socket = s.res.socket!;
      let state: { corked: number; queued: number } | null = null;
      // A stream's pump writes from a microtask: Node's own cork would hold the bytes until nextTick.
      await Promise.resolve().then(() => {
        void s.sse.event(record, Date.now() + 1000);
        state = { corked: socket.writableCorked, queued: socket.writableLength };
      });
      expect(state).to.deep.equal({ corked: 0, queued: 0 });
      const frame = `id: c1\nevent: message.received\ndata: ${JSON.stringify(record)}\n\n`;
      for (let i = 0; i < 200 && !s.received().includes(frame); i++) await new Promise((resolve) => setTimeout(resolve, 5));
      expect(s.received()).to.include(frame);
    } finally {
      await s.close();
    }
  });
});
