/**
 * One request of an attempt on one connection of its pool, and the
 * attempt's clock (see http-sender.ts): the clock stops while the request
 * waits for a connection, and with a wait limit a request still waiting then
 * is withdrawn, given to no connection and nothing written.
 */
import type { Dispatcher } from 'undici';
import type { SendGate } from './http-sender.js';
import { ON_CONNECTION, type HookedOptions, type PoolEntry } from './send-pools.js';

/** Bytes of a response body we read (to keep the connection reusable) before hanging up. */
const MAX_RESPONSE_BYTES = 64 * 1024;

/** A request dropped unwritten because its gate was not ready. */
const NOT_READY = new Error('the gate was not ready: dropped unwritten');

/**
 * An attempt's time limit: a clock that runs while the attempt is the
 * receiver's business and stops while its request waits for a connection.
 */
export class AttemptClock {
  private left: number;
  private since = 0;
  private timer: NodeJS.Timeout | null = null;
  private ended = false;

  constructor(
    private readonly limitMs: number,
    private readonly onOver: () => void,
  ) {
    this.left = limitMs;
    this.run();
  }

  run(): void {
    if (this.timer || this.ended) return;
    this.since = performance.now();
    this.timer = setTimeout(this.onOver, Math.max(0, this.left));
  }

  stop(): void {
    if (!this.timer) return;
    clearTimeout(this.timer);
    this.timer = null;
    this.left -= performance.now() - this.since;
  }

  end(): void {
    this.stop();
    this.ended = true;
  }

  /** Time counted so far. */
  get spentMs(): number {
    return this.limitMs - this.left + (this.timer ? performance.now() - this.since : 0);
  }
}

/** How a round ended: an answer, a failure, the gate not ready on the connection, or no connection in time. */
type Round = { kind: 'response'; status: number; headers: Record<string, string | string[] | undefined> } | { kind: 'error'; err: unknown } | { kind: 'not-ready' } | { kind: 'no-connection' };

/** The attempt a round belongs to: its request, its gate, its clock, and `over` (its time is up; `abort` ends the request in flight). */
export interface RoundRequest {
  target: { origin: string; path: string };
  body: string;
  headers: Record<string, string>;
  userAgent: string;
  gate: SendGate | undefined;
  over: { aborted: boolean; abort?: () => void };
  clock: AttemptClock;
  outOfTime: () => Error;
}

/** A round's state shared by its handler and its dispatch. */
interface RoundState {
  done: boolean;
  released: boolean;
  read: number;
  waiting: NodeJS.Timeout | null;
  answer: Round | null;
  finish(r: Round): void;
  /** The pool is done with the request (answered, failed, or let go after its withdrawal). */
  letGo(): void;
}

/**
 * One request on one connection of `entry`'s pool; `req.over` aborts it (the
 * attempt's time is up). With `waitMs`, a request still waiting for a
 * connection then is withdrawn ('no-connection').
 */
export function round(req: RoundRequest, entry: PoolEntry, waitMs: number | null): Promise<Round> {
  return new Promise<Round>((resolve) => {
    const state: RoundState = {
      done: false,
      released: false,
      read: 0,
      waiting: null,
      answer: null,
      finish(r) {
        if (state.done) return;
        state.done = true;
        req.over.abort = undefined;
        if (state.waiting) clearTimeout(state.waiting);
        resolve(r);
      },
      letGo() {
        if (state.released) return;
        state.released = true;
        entry.inFlight--;
        entry.lastUsed = performance.now();
      },
    };
    const options: HookedOptions = {
      origin: req.target.origin,
      path: req.target.path,
      method: 'POST',
      headers: { 'user-agent': req.userAgent, 'content-type': 'application/json', ...req.headers },
      body: req.body,
      // Handed to a connection: the wait is over and the clock runs again (connect and handshake count).
      [ON_CONNECTION]: () => {
        if (state.done) return false;
        if (state.waiting) clearTimeout(state.waiting);
        state.waiting = null;
        req.clock.run();
        return true;
      },
    };
    req.clock.stop();
    if (waitMs !== null) state.waiting = setTimeout(() => state.finish({ kind: 'no-connection' }), waitMs);
    entry.inFlight++;
    try {
      entry.pool.dispatch(options, roundHandler(req, state));
    } catch (err) {
      state.letGo();
      state.finish({ kind: 'error', err });
    }
  });
}

/**
 * The attempt's answer is the status, but the round ends with the body (read,
 * up to a limit, so the connection is free for the next request the moment
 * the round ends); a body cut short, over the limit or out of time leaves the
 * status standing.
 */
function roundHandler(req: RoundRequest, state: RoundState): Dispatcher.DispatchHandler {
  return {
    onRequestStart(controller) {
      req.over.abort = () => controller.abort(req.outOfTime());
      if (req.over.aborted) return controller.abort(req.outOfTime());
      // The connection is up: the last moment before the first byte.
      if (req.gate && !req.gate.ready()) controller.abort(NOT_READY);
    },
    onResponseStart(_controller, statusCode, resHeaders) {
      if (statusCode >= 200) state.answer = { kind: 'response', status: statusCode, headers: resHeaders }; // 1xx: still to come
    },
    onResponseData(controller, chunk) {
      state.read += chunk.length;
      if (state.read > MAX_RESPONSE_BYTES) controller.abort(new Error('response body over the limit'));
    },
    onResponseEnd() {
      state.letGo();
      if (state.answer) state.finish(state.answer);
    },
    onResponseError(_controller, err) {
      state.letGo();
      state.finish(state.answer ?? (err === NOT_READY ? { kind: 'not-ready' } : { kind: 'error', err }));
    },
  };
}
