/**
 * POST /api/v1/events/wait and the MCP wait_for_event tool: the next matching
 * event, or a timeout after timeout_ms. Everything that can fail (the
 * per-account cap, validation, the catch-up handoff and its store reads)
 * happens in `beginWait`, while the request is still in the middleware
 * chain, so its errors are rendered as any other. A long-poll that must then
 * wait becomes a PendingWait, a held reader (live/held.ts): no promise,
 * timer, AbortController or closure of its own. Its waiter wakes it, the
 * process's deadline wheel times it out, and its answer goes to the parked
 * response of its request (routes.ts) or to the MCP tool's promise.
 */
import { validationFailed } from '#shared/errors/index.js';
import type { EventRecord } from '#shared/eventlog/types.js';
import type { ApiDeps } from '../../deps.js';
import { openFeed, type Feed } from '../../live/feed.js';
import type { HeldReader } from '../../live/held.js';
import { liveStep, tracingLiveSteps } from '../../live/live-trace.js';
import type { WaiterListener } from '../../live/waiters.js';
import { waitBody, type WaitInput } from './schemas.js';
import { resolveSince, retainedAfter } from './service.js';

export type WaitResult = { event: EventRecord } | { event: null; timed_out: true; cursor: string | null };

/** Where a pending long-poll's answer goes, once (a ParkedResponse, or the MCP tool's promise). */
interface WaitAnswer {
  answer(result: WaitResult): void;
}

/** Only the first event matters to a long-poll; a burst beyond this before it is answered closes nothing it needs. */
const LONG_POLL_QUEUE = { events: 16, bytes: 4 * 1024 * 1024 };

/**
 * A long-poll registered for live events, not yet answered. It holds its
 * account's long-poll slot, a feed (and so a waiter) and a place in the
 * deadline wheel until it settles: on an event, at its deadline, on shutdown
 * (a timeout, so clients loop) or when its client leaves (`clientGone`).
 */
export class PendingWait implements WaiterListener, HeldReader {
  private to: WaitAnswer | null = null;
  private bucket = 0;
  private finished = false;

  constructor(
    private readonly deps: ApiDeps,
    private readonly accountId: string,
    private readonly feed: Feed,
    private readonly deadline: number,
  ) {}

  /** Waits for the answer, which goes to `to`; at once when there already is one. */
  wait(to: WaitAnswer): void {
    this.to = to;
    this.feed.listen(this);
    // An event may have been queued (or the feed closed) since beginWait looked.
    if (this.due) {
      this.settle();
      return;
    }
    this.bucket = this.deps.held.deadlines.add(this, this.deadline);
  }

  /** The waiter has an event, or has closed (shutdown, overflow). */
  ready(): void {
    this.settle();
  }

  expire(): void {
    this.settle();
  }

  /** The client has gone: answer now (to a closed response) and free the slot and the waiter. */
  clientGone(): void {
    this.settle();
  }

  /** Nothing to wait for: an event is there, the feed has closed, or the deadline has passed. */
  get due(): boolean {
    return this.feed.settled || Date.now() >= this.deadline;
  }

  /** The answer now: the next event, else a timeout with how far this wait checked. */
  result(): WaitResult {
    const next = this.feed.takeNow();
    return next ? { event: next.record } : { event: null, timed_out: true, cursor: this.feed.checkedCursor() };
  }

  /** Frees what the long-poll holds (once): the waiter, its gauge, its slot. */
  finish(): void {
    if (this.finished) return;
    this.finished = true;
    this.feed.listen(null);
    this.feed.close();
    this.deps.metrics.openLongPolls.dec();
    this.deps.held.longPolls.release(this.accountId);
  }

  private settle(): void {
    const to = this.to;
    if (!to) return;
    this.to = null;
    this.deps.held.deadlines.remove(this, this.bucket);
    const result = this.result(); // before finish: the cursor is read from the open feed
    this.finish();
    try {
      to.answer(result);
      if (result.event && tracingLiveSteps()) liveStep({ step: 'longpoll.written', data: result.event.data });
    } catch (err) {
      // Called from the fan-out's dispatch or a timer: an answer that fails must not stop either.
      this.deps.log.error({ err, account_id: this.accountId }, 'could not answer a long-poll');
    }
  }
}

/**
 * Takes the account's long-poll slot (429 over the cap), validates the input,
 * registers for live events and reads what the cursor still owes (503 when
 * the store cannot say). The result when there is one already (an event, a
 * timeout of 0, a closed feed); else a PendingWait to `wait` on.
 */
export async function beginWait(deps: ApiDeps, accountId: string, input: WaitInput): Promise<WaitResult | PendingWait> {
  deps.held.longPolls.hold(accountId);
  let opened: { feed: Feed; deadline: number };
  try {
    opened = await openLongPollFeed(deps, accountId, input);
  } catch (err) {
    deps.held.longPolls.release(accountId);
    throw err;
  }
  deps.metrics.openLongPolls.inc();
  const pending = new PendingWait(deps, accountId, opened.feed, opened.deadline);
  let first;
  try {
    first = await opened.feed.takeReady();
  } catch (err) {
    pending.finish();
    throw err;
  }
  if (!first && !pending.due) return pending;
  const result = first ? { event: first.record } : pending.result();
  pending.finish();
  return result;
}

async function openLongPollFeed(deps: ApiDeps, accountId: string, input: WaitInput): Promise<{ feed: Feed; deadline: number }> {
  const q = waitBody(input); // validated here, whoever calls: the input may be anything
  const { longPollMaxMs, longPollDefaultMs } = deps.config.events;
  const timeoutMs = q.timeout_ms ?? Math.min(longPollDefaultMs, longPollMaxMs);
  if (timeoutMs > longPollMaxMs) throw validationFailed([{ path: 'timeout_ms', message: `must be <= ${longPollMaxMs}` }]);
  const since = q.since === undefined ? null : resolveSince(deps, accountId, q.since, 'since');
  if (since) await retainedAfter(deps, since.partition, since); // 410 below the retention
  const deadline = Date.now() + timeoutMs;
  const types = q.types && q.types.length > 0 ? q.types : null;
  const feed = await openFeed(deps.events.feedPorts, { accountId, types, since, pageSize: 1, maxQueue: LONG_POLL_QUEUE });
  return { feed, deadline };
}

/**
 * waitForEvent as a promise (the MCP tool; tests): `signal` ends the wait
 * early as a timeout, like a client that goes away.
 */
export async function waitForEvent(deps: ApiDeps, accountId: string, input: WaitInput, signal?: AbortSignal): Promise<WaitResult> {
  const started = await beginWait(deps, accountId, input);
  if (!(started instanceof PendingWait)) return started;
  return new Promise((resolve) => {
    const onAbort = (): void => started.clientGone();
    signal?.addEventListener('abort', onAbort, { once: true });
    started.wait({
      answer(result) {
        signal?.removeEventListener('abort', onAbort);
        resolve(result);
      },
    });
    if (signal?.aborted) started.clientGone();
  });
}
