/**
 * One open SSE stream: holds a stream slot, reads the account's feed and
 * writes it out, with heartbeats (which also renew the slot) until the
 * duration is up, the client leaves, or the process stops. The stream opens
 * with a resume point, each heartbeat carries one and so does a stream the
 * server ends: the feed's checked cursor, which never passes an event not yet
 * written to this stream.
 */
import type { Logger } from '../../../../shared/src/log.js';
import type { Feed } from '../../live/feed.js';
import type { StreamLease, StreamSlots } from './slots.js';
import type { SseWriter } from './sse.js';

export type StreamEnd = 'duration' | 'client' | 'closed' | 'overflow' | 'shutdown' | 'lease_lost' | 'error';

interface StreamTiming {
  durationMs: number;
  heartbeatMs: number;
}

export async function pumpStream(feed: Feed, sse: SseWriter, slots: StreamSlots, lease: StreamLease, timing: StreamTiming, signal: AbortSignal, log: Logger): Promise<StreamEnd> {
  const end = Date.now() + timing.durationMs;
  let nextBeat = Date.now() + timing.heartbeatMs;
  const opened = feed.checkedCursor();
  if (opened) await sse.resumePoint(opened, end);
  const ended = async (why: StreamEnd): Promise<StreamEnd> => {
    const at = feed.checkedCursor();
    if (at && !sse.closed) await sse.resumePoint(at, Date.now() + 1000);
    return why;
  };
  for (;;) {
    if (signal.aborted || sse.closed) return 'client';
    const now = Date.now();
    if (now >= end) return ended('duration');
    if (now >= nextBeat) {
      nextBeat += timing.heartbeatMs;
      await sse.heartbeat(feed.checkedCursor(), end);
      if (!(await renew(slots, lease, log))) return 'lease_lost';
      continue;
    }
    let next;
    try {
      next = await feed.next(Math.min(end, nextBeat) - now, signal);
    } catch (err) {
      // MongoDB failed during catch-up: end here; the client resumes from its Last-Event-ID.
      log.warn({ err }, 'stream catch-up read failed; closing the stream');
      return 'error';
    }
    if (next) await sse.event(next.record, end);
    else if (feed.closedBy) return feed.closedBy === 'closed' ? 'closed' : ended(feed.closedBy);
  }
}

async function renew(slots: StreamSlots, lease: StreamLease, log: Logger): Promise<boolean> {
  try {
    return await slots.renew(lease);
  } catch (err) {
    // MongoDB unreachable: keep streaming; the slot may lapse, which only over-admits briefly.
    log.warn({ err }, 'could not renew the stream slot');
    return true;
  }
}
