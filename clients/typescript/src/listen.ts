/**
 * `client.events.listen()`: one async iterator over the account's event log
 * that survives disconnects, server restarts and the server's 50 s stream
 * limit without missing or repeating an event.
 *
 * How: the iterator keeps one cursor, the position up to which it has handed
 * out everything (each event's `cursor`, and the stream's `resume` points,
 * which the server sends when a stream opens, before each heartbeat and when
 * it ends it). Every (re)connection resumes strictly after that cursor: SSE
 * with `Last-Event-ID`, long-poll with `since`. The server replays what came
 * after the cursor and then goes live, so nothing is missed; nothing at or
 * before the cursor is sent again, so nothing repeats. As a second guard the
 * iterator drops an event id it has handed out recently (the log can hold one
 * event twice after an ingest retry, docs/api.md "Idempotency").
 *
 * Transport: SSE first (a stream token is minted, reused until it is about to
 * expire, and minted again after a 401). When the stream route is not usable
 * (404/405/501, an answer that is not `text/event-stream`, or the account's
 * 6 streams all taken) the iterator long-polls `POST /api/v1/events/wait` for
 * `sseRetryMs`, then tries SSE again. Connection failures (a restarting
 * server) are retried with capped backoff, forever, until the caller stops
 * iterating or aborts the signal.
 */
import { ApiError, ConnectionError, errorFromResponse } from './errors.js';
import { backoffDelay, sleep, type HttpClient } from './http.js';
import type { EventRecord, EventType, StreamToken, WaitResult } from './types.js';

export type Transport = 'sse' | 'long-poll';

export interface ReconnectInfo {
  transport: Transport;
  /** Why the last connection ended: `ended` (the server closed the stream), or an error's code/name. */
  reason: string;
  /** Where the next connection resumes (null: at the live end). */
  cursor: string | null;
  /** What the iterator waits first. */
  delayMs: number;
}

export interface ListenOptions {
  /** Only these types (default: all). */
  types?: EventType[];
  /** Start strictly after this cursor (default: events arriving from now on). */
  since?: string | null;
  /** `auto` (default): SSE, falling back to long-poll. */
  transport?: 'auto' | Transport;
  /** Stops the iteration (the loop ends without an error). */
  signal?: AbortSignal;
  /** A stream that shows no byte for this long is dropped and resumed (heartbeats come every 15 s). Default 45 s. */
  idleTimeoutMs?: number;
  /** Each long-poll's `timeout_ms`. Default 25 s. */
  longPollTimeoutMs?: number;
  /** After falling back to long-poll, try SSE again after this long. Default 60 s. */
  sseRetryMs?: number;
  /** Longest wait between reconnects after failures. Default 10 s. */
  maxReconnectDelayMs?: number;
  /** Called when a connection is established: an SSE stream answered 200 (events from then on are delivered), or a long-poll is about to be sent. */
  onOpen?: (transport: Transport) => void;
  /** Called whenever the resume cursor moves. */
  onCursor?: (cursor: string) => void;
  /** Called before each reconnect. */
  onReconnect?: (info: ReconnectInfo) => void;
  /** Called when the transport changes. */
  onTransport?: (transport: Transport, why: string) => void;
}

interface SseMessage {
  id: string | null;
  event: string;
  data: string;
}

/** Incremental text/event-stream parser (WHATWG rules: \n, \r\n or \r line ends; `:` comments). */
export class SseParser {
  private buffer = '';
  private data: string[] = [];
  private event = '';
  private id: string | null = null;
  private sawId = false;
  private skipLf = false;

  /** Feeds a chunk; returns the messages it completed. */
  push(chunk: string): SseMessage[] {
    this.buffer += chunk;
    const out: SseMessage[] = [];
    for (;;) {
      // A \n right after a \r that ended the previous chunk's last line belongs to that line end.
      if (this.skipLf && this.buffer.length > 0) {
        if (this.buffer.startsWith('\n')) this.buffer = this.buffer.slice(1);
        this.skipLf = false;
      }
      const m = /\r\n|\r|\n/.exec(this.buffer);
      if (!m) break;
      if (m[0] === '\r' && m.index === this.buffer.length - 1) this.skipLf = true;
      const line = this.buffer.slice(0, m.index);
      this.buffer = this.buffer.slice(m.index + m[0].length);
      if (line === '') {
        if (this.data.length > 0 || this.sawId) out.push({ id: this.sawId ? this.id : null, event: this.event || 'message', data: this.data.join('\n') });
        this.data = [];
        this.event = '';
        this.sawId = false;
        continue;
      }
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon === -1 ? line : line.slice(0, colon);
      let value = colon === -1 ? '' : line.slice(colon + 1);
      if (value.startsWith(' ')) value = value.slice(1);
      if (field === 'data') this.data.push(value);
      else if (field === 'event') this.event = value;
      else if (field === 'id' && !value.includes('\0')) {
        this.id = value;
        this.sawId = true;
      }
    }
    return out;
  }
}

/** Remembers the last `size` ids handed out. */
class RecentIds {
  private readonly order: string[] = [];
  private readonly set = new Set<string>();
  constructor(private readonly size = 10_000) {}
  has(id: string): boolean {
    return this.set.has(id);
  }
  add(id: string): void {
    this.set.add(id);
    this.order.push(id);
    if (this.order.length > this.size) this.set.delete(this.order.shift()!);
  }
}

/** The SSE route cannot serve this client: long-poll instead for a while. */
class SseUnusable extends Error {}

/** The stream refused its token (expired, or minted under a key since rotated): mint another. */
class TokenRejected extends Error {
  constructor(readonly error: ApiError) {
    super(error.message);
  }
}

export async function* listen(http: HttpClient, opts: ListenOptions = {}): AsyncGenerator<EventRecord, void, undefined> {
  const idleTimeoutMs = opts.idleTimeoutMs ?? 45_000;
  const longPollMs = opts.longPollTimeoutMs ?? 25_000;
  const sseRetryMs = opts.sseRetryMs ?? 60_000;
  const maxDelay = opts.maxReconnectDelayMs ?? 10_000;
  const types = opts.types && opts.types.length > 0 ? [...opts.types] : undefined;
  const recent = new RecentIds();
  let cursor: string | null = opts.since ?? null;
  let transport: Transport = opts.transport === 'long-poll' ? 'long-poll' : 'sse';
  let sseAgainAt = Infinity;
  let token: { value: string; url: string; expiresAt: number } | null = null;
  let failures = 0;
  let tokenRejections = 0;
  const outer = opts.signal;

  const moveCursor = (next: string | null | undefined): void => {
    if (next && next !== cursor) {
      cursor = next;
      opts.onCursor?.(next);
    }
  };
  const switchTo = (next: Transport, why: string): void => {
    if (next === transport) return;
    transport = next;
    opts.onTransport?.(next, why);
  };
  const pause = async (reason: string, retryAfterS: number | null = null): Promise<void> => {
    failures += 1;
    const delayMs = retryAfterS !== null ? retryAfterS * 1000 : backoffDelay(failures, 250, maxDelay);
    opts.onReconnect?.({ transport, reason, cursor, delayMs });
    await sleep(delayMs, outer);
  };

  async function streamToken(): Promise<{ value: string; url: string }> {
    if (!token || token.expiresAt - Date.now() < 10_000) {
      const minted = await http.request<StreamToken>('POST', '/api/v1/events/stream-token', { signal: outer });
      token = { value: minted.token, url: minted.stream_url, expiresAt: Date.parse(minted.expires_at) };
    }
    return token;
  }

  /** One SSE connection: yields its events until the server ends it or it fails. */
  async function* sseOnce(): AsyncGenerator<EventRecord, void, undefined> {
    const { url: streamUrl } = await streamToken();
    const url = new URL(streamUrl, http.baseUrl + '/');
    if (types) url.searchParams.set('types', types.join(','));
    const controller = new AbortController();
    const onAbort = (): void => controller.abort(outer?.reason);
    outer?.addEventListener('abort', onAbort, { once: true });
    let idle: NodeJS.Timeout | undefined;
    const armIdle = (): void => {
      clearTimeout(idle);
      idle = setTimeout(() => controller.abort(new ConnectionError(`no data from the stream for ${idleTimeoutMs} ms`)), idleTimeoutMs);
    };
    try {
      armIdle();
      const headers: Record<string, string> = { accept: 'text/event-stream', 'user-agent': http.options.userAgent ?? 'event-platform-client' };
      if (cursor) headers['last-event-id'] = cursor;
      let res: Response;
      try {
        res = await (http.options.fetch ?? fetch)(url, { headers, signal: controller.signal });
      } catch (err) {
        throw outer?.aborted ? outer.reason : new ConnectionError(`stream: ${(err as Error).message}`, err);
      }
      if (!res.ok) {
        const error = errorFromResponse(res.status, res.headers, await res.text().catch(() => ''));
        if (res.status === 401) throw new TokenRejected(error);
        if ([404, 405, 406, 501].includes(res.status) || error.code === 'too_many_streams') throw new SseUnusable(`${res.status} ${error.code}`);
        throw error;
      }
      if (!(res.headers.get('content-type') ?? '').startsWith('text/event-stream') || !res.body) {
        await res.body?.cancel();
        throw new SseUnusable(`content-type ${res.headers.get('content-type')}`);
      }
      opts.onOpen?.('sse');
      const parser = new SseParser();
      const decoder = new TextDecoder();
      const reader = res.body.getReader();
      try {
        for (;;) {
          let chunk: Awaited<ReturnType<typeof reader.read>>;
          try {
            chunk = await reader.read();
          } catch (err) {
            if (outer?.aborted) return;
            throw new ConnectionError(`stream: ${(err as Error).message}`, err);
          }
          if (chunk.done) return;
          armIdle();
          failures = 0;
          tokenRejections = 0;
          for (const msg of parser.push(decoder.decode(chunk.value, { stream: true }))) {
            if (msg.event === 'resume') {
              moveCursor(msg.id);
              continue;
            }
            if (!msg.data) continue;
            const record = JSON.parse(msg.data) as EventRecord;
            if (types && !types.includes(record.type)) continue;
            moveCursor(msg.id || record.cursor);
            if (recent.has(record.id)) continue;
            recent.add(record.id);
            yield record;
          }
        }
      } finally {
        await reader.cancel().catch(() => undefined);
      }
    } finally {
      clearTimeout(idle);
      outer?.removeEventListener('abort', onAbort);
      controller.abort();
    }
  }

  while (!outer?.aborted) {
    try {
      if (transport === 'sse') {
        yield* sseOnce();
        // The server ended the stream (its duration, a shutdown): resume at once.
        if (outer?.aborted) return;
        opts.onReconnect?.({ transport, reason: 'ended', cursor, delayMs: 0 });
        continue;
      }
      opts.onOpen?.('long-poll');
      const result = await http.request<WaitResult>('POST', '/api/v1/events/wait', {
        body: { ...(types ? { types } : {}), timeout_ms: longPollMs, ...(cursor ? { since: cursor } : {}) },
        timeoutMs: longPollMs + 15_000,
        idempotent: true,
        signal: outer,
      });
      failures = 0;
      // Back to SSE once its time has come (after at least one long-poll, so a route that keeps refusing cannot spin).
      if (opts.transport !== 'long-poll' && Date.now() >= sseAgainAt) switchTo('sse', 'retrying SSE');
      if (result.event) {
        moveCursor(result.event.cursor);
        if (!recent.has(result.event.id)) {
          recent.add(result.event.id);
          yield result.event;
        }
      } else {
        moveCursor(result.cursor);
      }
    } catch (err) {
      if (outer?.aborted) return;
      if (err instanceof SseUnusable) {
        if (opts.transport === 'sse') throw new ConnectionError(`SSE is not usable here: ${err.message}`);
        sseAgainAt = Date.now() + sseRetryMs;
        switchTo('long-poll', err.message);
        continue;
      }
      if (err instanceof TokenRejected) {
        token = null;
        if (++tokenRejections > 3) throw err.error;
        continue;
      }
      // A refused credential, a bad cursor or type, will not get better by retrying.
      if (err instanceof ApiError && err.status < 500 && err.status !== 429 && err.status !== 408) throw err;
      if (err instanceof ApiError || err instanceof ConnectionError) {
        await pause(err instanceof ApiError ? err.code : 'connection', err instanceof ApiError ? err.retryAfter : null).catch(() => undefined);
        continue;
      }
      throw err;
    }
  }
}
