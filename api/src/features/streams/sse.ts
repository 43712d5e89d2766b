/**
 * Server-sent events on a raw Node response: the framing and flow control.
 * Each event is `id: <cursor>`, `event: <type>`, `data: <record JSON>`; JSON
 * never contains a raw newline, so one `data:` line always suffices.
 * A resume point is `id: <cursor>`, `event: resume`, `data: {"cursor":…}`:
 * it moves EventSource's lastEventId, so a stream that carried no event
 * still reconnects exactly where it was, and fires only for a listener of
 * `resume` (not onmessage, not the event types). It carries data because
 * the `eventsource` npm client (eventsource-parser 3.x) ignores a message
 * with only an `id:`, which browsers would honour.
 */
import type { ServerResponse } from 'node:http';
import type { EventRecord } from '#shared/eventlog/types.js';
import { liveStep, tracingLiveSteps } from '../../live/live-trace.js';

const SSE_HEADERS = {
  'Content-Type': 'text/event-stream; charset=utf-8',
  'Cache-Control': 'no-cache, no-transform',
  Connection: 'keep-alive',
  // nginx and similar proxies would otherwise buffer the stream.
  'X-Accel-Buffering': 'no',
} as const;

function frameEvent(record: EventRecord): string {
  return `id: ${record.cursor}\nevent: ${record.type}\ndata: ${JSON.stringify(record)}\n\n`;
}

function frameResume(cursor: string): string {
  return `id: ${cursor}\nevent: resume\ndata: ${JSON.stringify({ cursor })}\n\n`;
}

export class SseWriter {
  constructor(private readonly res: ServerResponse) {}

  get closed(): boolean {
    return this.res.destroyed || this.res.writableEnded;
  }

  open(headers: Record<string, string>, retryMs: number): void {
    this.res.socket?.setNoDelay(true);
    this.res.writeHead(200, { ...SSE_HEADERS, ...headers });
    this.res.write(`retry: ${retryMs}\n\n`);
  }

  event(record: EventRecord, deadline: number): Promise<void> {
    const written = this.write(frameEvent(record), deadline);
    if (tracingLiveSteps()) liveStep({ step: 'sse.written', data: record.data });
    return written;
  }

  comment(text: string, deadline: number): Promise<void> {
    return this.write(`: ${text}\n\n`, deadline);
  }

  /** A heartbeat comment, after the resume point when there is one. */
  heartbeat(cursor: string | null, deadline: number): Promise<void> {
    return this.write(`${cursor ? frameResume(cursor) : ''}: heartbeat\n\n`, deadline);
  }

  /** Where a reconnect resumes (sets lastEventId; no event of any type the stream carries). */
  resumePoint(cursor: string, deadline: number): Promise<void> {
    return this.write(frameResume(cursor), deadline);
  }

  end(): void {
    if (!this.closed) this.res.end();
  }

  /**
   * Hands `chunk` to the socket now, in one write. Left to itself, Node corks
   * the socket for a chunked write and uncorks it on process.nextTick, which
   * runs only once the microtask queue has drained: a stream writes from a
   * microtask (its pump), so the event would wait for the rest of the
   * fan-out's turn (docs/performance.md, "Where a live event's time goes").
   * Corked and uncorked here, the chunk's size line, data and CRLF go out
   * together at once. False when the socket's buffer is full (wait for 'drain').
   */
  private send(chunk: string): boolean {
    const socket = this.res.socket;
    if (!socket) return this.res.write(chunk);
    socket.cork();
    try {
      return this.res.write(chunk);
    } finally {
      socket.uncork();
    }
  }

  /** Waits for a full socket buffer to drain; a reader that never drains is cut off at the deadline. */
  private async write(chunk: string, deadline: number): Promise<void> {
    if (this.closed || this.send(chunk)) return;
    const drained = await new Promise<boolean>((resolve) => {
      const done = (ok: boolean) => () => {
        clearTimeout(timer);
        this.res.off('drain', onDrain).off('close', onClose);
        resolve(ok);
      };
      const onDrain = done(true);
      const onClose = done(true);
      const timer = setTimeout(done(false), Math.max(0, deadline - Date.now()));
      this.res.once('drain', onDrain).once('close', onClose);
    });
    if (!drained) this.res.destroy();
  }
}
