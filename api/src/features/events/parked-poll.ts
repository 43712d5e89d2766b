/**
 * A long-poll that must wait leaves the middleware chain (middleware/parked.ts)
 * and is answered later on its raw response: the chain's frames, promises and
 * closures are freed while it waits; what stays is Node's request and
 * response, Koa's context, and the PendingWait.
 */
import type { ServerResponse } from 'node:http';
import type { Context } from 'koa';
import { park, unwatchClientGone, watchClientGone, writeJson, type ParkedResponse } from '../../middleware/parked.js';
import type { PendingWait, WaitAnswer, WaitResult } from './long-poll.js';

class ParkedAnswer implements WaitAnswer {
  constructor(
    private readonly res: ServerResponse,
    private readonly parked: ParkedResponse,
    private readonly onAnswer: ((result: WaitResult) => void) | undefined,
  ) {}

  answer(result: WaitResult): void {
    unwatchClientGone(this.res);
    this.onAnswer?.(result);
    writeJson(this.res, 200, result);
    this.parked.done(200);
  }
}

/** Parks the request until `pending` settles, then writes its answer as Koa would have (`onAnswer` sees it first: tracing). */
export function parkLongPoll(ctx: Context, pending: PendingWait, onAnswer?: (result: WaitResult) => void): void {
  const res = ctx.res;
  const parked = park(ctx);
  // A client that goes away frees its long-poll's slot and waiter at once.
  watchClientGone(res, pending);
  pending.wait(new ParkedAnswer(res, parked, onAnswer));
  // A client that left while it was being authenticated has already closed: its 'close'
  // event is gone, and without this its long-poll would be held for timeout_ms.
  if (res.destroyed) pending.clientGone();
}
