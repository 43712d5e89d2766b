/**
 * An SSE stream runs on its raw response with its request parked
 * (middleware/parked.ts): the middleware chain returns as soon as the stream
 * has opened, and the request is counted and logged when the stream ends.
 */
import type { ServerResponse } from 'node:http';
import type { Context } from 'koa';
import type { Logger } from '#shared/log.js';
import { park, unwatchClientGone, watchClientGone, type ParkedResponse } from '../../middleware/parked.js';
import type { PreparedStream } from './service.js';
import type { LiveStream, StreamDone, StreamEnd } from './stream.js';

class StreamRequest implements StreamDone {
  constructor(
    private readonly res: ServerResponse,
    private readonly parked: ParkedResponse,
    private readonly log: Logger,
    private readonly requestId: unknown,
    private readonly accountId: string,
  ) {}

  ended(why: StreamEnd): void {
    unwatchClientGone(this.res);
    this.log.info({ request_id: this.requestId, account_id: this.accountId, end: why }, 'stream closed');
    this.parked.done(200);
  }
}

/** Starts `stream` on the request's response and lets the middleware chain return. */
export function runParkedStream(ctx: Context, log: Logger, accountId: string, stream: PreparedStream): void {
  const res = ctx.res;
  const parked = park(ctx);
  let live: LiveStream;
  try {
    live = stream.start(res, new StreamRequest(res, parked, log, ctx.state.requestId, accountId));
  } catch (err) {
    log.error({ err, request_id: ctx.state.requestId, path: ctx.path }, 'unhandled error');
    parked.done(500);
    return;
  }
  watchClientGone(res, live);
  // A client that left while the stream was being prepared has already closed.
  if (res.destroyed) live.clientGone();
}
