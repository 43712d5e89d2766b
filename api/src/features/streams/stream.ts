/**
 * One open SSE stream: holds a stream slot, reads the account's feed and
 * writes it out, with heartbeats (which also renew the slot) until the
 * duration is up, the client leaves, or the process stops. The stream opens
 * with a resume point, each heartbeat carries one and so does a stream the
 * server ends: the feed's checked cursor, which never passes an event not yet
 * written to this stream.
 *
 * Event-driven, not a loop that waits: the stream pumps (an async run that
 * writes what is due) only while there is something to write; then it parks
 * with no promise, frame or timer of its own, until its waiter has an event
 * (WaiterListener), its next heartbeat or its end comes round on the
 * process's deadline wheel (`expire`), or its client leaves (`clientGone`):
 * a held reader (live/held.ts).
 * 3,000 idle streams hold 3,000 small objects, not 3,000 suspended loops.
 */
import type { Logger } from '#shared/log.js';
import type { DeadlineWheel, HeldReader } from '../../live/held.js';
import type { Feed } from '../../live/feed.js';
import type { WaiterListener } from '../../live/waiters.js';
import type { StreamLease, StreamSlots } from './slots.js';
import type { SseWriter } from './sse.js';

export type StreamEnd = 'duration' | 'client' | 'closed' | 'overflow' | 'shutdown' | 'lease_lost' | 'error';

interface StreamTiming {
  durationMs: number;
  heartbeatMs: number;
}

/** What a stream runs on, besides its feed and its writer. */
interface StreamParts {
  slots: StreamSlots;
  lease: StreamLease;
  timing: StreamTiming;
  deadlines: DeadlineWheel;
  log: Logger;
}

/** Told once, when the stream has ended (nothing more is written to it). */
interface StreamDone {
  ended(why: StreamEnd): void;
}

export class LiveStream implements WaiterListener, HeldReader {
  private readonly end: number;
  private nextBeat: number;
  /** A pump is writing: the only time the stream holds an async frame. */
  private running = false;
  private finished = false;
  private gone = false;
  /** Its place on the deadline wheel while parked (null when not on it). */
  private bucket: number | null = null;

  constructor(
    private readonly feed: Feed,
    private readonly sse: SseWriter,
    private readonly parts: StreamParts,
    private readonly done: StreamDone,
  ) {
    const now = Date.now();
    this.end = now + parts.timing.durationMs;
    this.nextBeat = now + parts.timing.heartbeatMs;
  }

  /** Starts writing: the resume point, what the feed has, then live events until the stream ends. */
  start(): void {
    this.feed.listen(this);
    this.kick(true);
  }

  /** The waiter has an event, or has closed. */
  ready(): void {
    this.kick(false);
  }

  /** The next heartbeat or the end is due. */
  expire(): void {
    this.bucket = null; // the wheel has let go of it
    this.kick(false);
  }

  /** The client has gone: the stream ends ('client'). */
  clientGone(): void {
    this.gone = true;
    this.kick(false);
  }

  private kick(first: boolean): void {
    if (this.running || this.finished) return;
    if (this.bucket !== null) this.parts.deadlines.remove(this, this.bucket);
    this.bucket = null;
    this.running = true;
    this.pump(first).then(
      (why) => {
        if (why) this.finish(why);
      },
      (err: unknown) => {
        this.parts.log.warn({ err }, 'stream write failed; closing the stream');
        this.finish('error');
      },
    );
  }

  /** Writes what is due; resolves with why the stream ended, or null when it has parked. */
  private async pump(first: boolean): Promise<StreamEnd | null> {
    const { feed, sse } = this;
    if (first) {
      const opened = feed.checkedCursor();
      if (opened) await sse.resumePoint(opened, this.end);
    }
    for (;;) {
      if (this.gone || sse.closed) return 'client';
      const now = Date.now();
      if (now >= this.end) return this.closing('duration');
      if (now >= this.nextBeat) {
        this.nextBeat += this.parts.timing.heartbeatMs;
        await sse.heartbeat(feed.checkedCursor(), this.end);
        if (!(await renew(this.parts))) return 'lease_lost';
        continue;
      }
      let next;
      try {
        next = await feed.takeReady();
      } catch (err) {
        // MongoDB failed during catch-up: end here; the client resumes from its Last-Event-ID.
        this.parts.log.warn({ err }, 'stream catch-up read failed; closing the stream');
        return 'error';
      }
      if (next) await sse.event(next.record, this.end);
      else if (feed.closedBy) return feed.closedBy === 'closed' ? 'closed' : this.closing(feed.closedBy);
      else if (!feed.settled && !this.gone) {
        // Nothing to write until an event, a heartbeat or the end (checked in this same
        // tick, so an event queued while the pump ran is not left waiting).
        this.bucket = this.parts.deadlines.add(this, Math.min(this.end, this.nextBeat));
        this.running = false;
        return null;
      }
    }
  }

  /** The server ends the stream: a last resume point, so the client reconnects exactly where it was. */
  private async closing(why: StreamEnd): Promise<StreamEnd> {
    const at = this.feed.checkedCursor();
    if (at && !this.sse.closed) await this.sse.resumePoint(at, Date.now() + 1000);
    return why;
  }

  private finish(why: StreamEnd): void {
    if (this.finished) return;
    this.finished = true;
    this.running = false;
    if (this.bucket !== null) this.parts.deadlines.remove(this, this.bucket);
    this.bucket = null;
    this.feed.listen(null);
    this.done.ended(why);
  }
}

async function renew(parts: StreamParts): Promise<boolean> {
  try {
    return await parts.slots.renew(parts.lease);
  } catch (err) {
    // MongoDB unreachable: keep streaming; the slot may lapse, which only over-admits briefly.
    parts.log.warn({ err }, 'could not renew the stream slot');
    return true;
  }
}
