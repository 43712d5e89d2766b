import type { ServerResponse } from 'node:http';
import { type Position } from '#shared/cursor.js';
import type { EventType } from '#shared/eventlog/types.js';
import type { ApiDeps } from '../../deps.js';
import { openFeed, type Feed } from '../../live/feed.js';
import { SseWriter } from './sse.js';
import { LiveStream, type StreamDone, type StreamEnd } from './stream.js';
import { mintStreamToken } from './tokens.js';

/** Bytes of live events one stream may have queued (the count is config.streams.queueEvents). */
const STREAM_QUEUE_BYTES = 16 * 1024 * 1024;

interface StreamTokenResponse {
  token: string;
  expires_at: string;
  stream_url: string;
}

/** POST /api/v1/events/stream-token: a short-lived token for the stream URL, bound to the account. */
export function createStreamToken(deps: ApiDeps, accountId: string, origin: string): StreamTokenResponse {
  const { token, expiresAt } = mintStreamToken(deps.streams.tokenKey, accountId, deps.clock(), deps.config.streams.tokenTtlSeconds);
  return { token, expires_at: expiresAt.toISOString(), stream_url: `${origin}/api/v1/events/stream?token=${encodeURIComponent(token)}` };
}

export interface PreparedStream {
  /**
   * Opens the stream on `res` and returns at once: it writes until it ends,
   * then releases the slot and the feed and tells `done` why it ended.
   */
  start(res: ServerResponse, done: StreamDone): LiveStream;
  /** For a stream that never starts. */
  abandon(): Promise<void>;
}

/**
 * Everything that can still be refused with a JSON error happens here, before
 * a byte of the stream is sent: the slot (429) and the catch-up handoff (503).
 */
export async function prepareStream(deps: ApiDeps, accountId: string, opts: { types: EventType[] | null; since: Position | null }): Promise<PreparedStream> {
  const { slots } = deps.streams;
  const lease = await slots.acquire(accountId);
  let feed: Feed;
  try {
    feed = await openFeed(deps.events.feedPorts, {
      accountId,
      types: opts.types,
      since: opts.since,
      pageSize: 200,
      // A burst of live events is fine; a reader that stops reading is cut off and resumes by cursor.
      maxQueue: { events: deps.config.streams.queueEvents, bytes: STREAM_QUEUE_BYTES },
    });
  } catch (err) {
    await slots.release(lease).catch(() => undefined);
    throw err;
  }
  const finish = async (): Promise<void> => {
    feed.close();
    await slots.release(lease).catch((err: unknown) => deps.log.warn({ err }, 'could not release a stream slot; it expires by itself'));
  };
  return {
    abandon: finish,
    start(res, done) {
      const sse = new SseWriter(res);
      const { durationMs, heartbeatMs, retryMs } = deps.config.streams;
      deps.metrics.openStreams.inc();
      const ended = (why: StreamEnd): void => {
        deps.metrics.openStreams.dec();
        sse.end();
        void finish().then(() => done.ended(why));
      };
      try {
        // no-store like every authenticated response (the SSE default is no-cache).
        sse.open({ 'Cache-Control': 'no-store, no-transform' }, retryMs);
      } catch (err) {
        ended('error');
        throw err;
      }
      const parts = { slots, lease, timing: { durationMs, heartbeatMs }, deadlines: deps.events.deadlines, log: deps.log };
      const stream = new LiveStream(feed, sse, parts, { ended });
      stream.start();
      return stream;
    },
  };
}
