import { type Position } from '#shared/cursor.js';
import type { EventType } from '#shared/eventlog/types.js';
import type { ApiDeps } from '../../deps.js';
import { openFeed, type Feed } from '../../live/feed.js';
import type { ParkedResponse } from '../../live/held.js';
import { SseWriter } from './sse.js';
import { LiveStream, type StreamEnd } from './stream.js';
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

interface PreparedStream {
  /**
   * Opens the stream on the parked response and returns at once: it writes
   * until it ends, then releases the slot and the feed, logs why it ended
   * and ends the parked response (the request is counted and logged then).
   */
  start(parked: ParkedResponse, requestId: unknown): LiveStream;
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
    start(parked, requestId) {
      const sse = new SseWriter(parked.res);
      const { durationMs, heartbeatMs, retryMs } = deps.config.streams;
      deps.metrics.openStreams.inc();
      const ended = (why: StreamEnd): void => {
        deps.metrics.openStreams.dec();
        sse.end();
        void finish().then(() => {
          deps.log.info({ request_id: requestId, account_id: accountId, end: why }, 'stream closed');
          parked.end(200);
        });
      };
      try {
        // no-store like every authenticated response (the SSE default is no-cache).
        sse.open({ 'Cache-Control': 'no-store, no-transform' }, retryMs);
      } catch (err) {
        ended('error');
        throw err;
      }
      const parts = { slots, lease, timing: { durationMs, heartbeatMs }, deadlines: deps.held.deadlines, log: deps.log };
      const stream = new LiveStream(feed, sse, parts, { ended });
      stream.start();
      return stream;
    },
  };
}
