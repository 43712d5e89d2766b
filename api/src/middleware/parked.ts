/**
 * Parked responses: a request whose answer comes later (a long-poll waiting
 * for its event) lets the middleware chain return at once, and its handler
 * writes the raw response when the answer is known. A held reader then keeps
 * no suspended frame of any middleware, promise or bound `next` of Koa's
 * compose (docs/architecture.md, "What a held reader costs").
 *
 * What a middleware does once a response is done (the request metric, the
 * request log) it registers with `whenDone` when it finds the request
 * parked, and runs with the status the response was finally written with.
 * A handler parks last: nothing may throw after `park` (Koa no longer
 * writes the response, so an error could not be rendered).
 */
import type { ServerResponse } from 'node:http';
import type { Context } from 'koa';

const PARKED = Symbol('parked response');

export class ParkedResponse {
  private hooks: ((status: number) => void)[] = [];
  private status: number | null = null;

  /** Runs `hook` with the final status once the response is written (at once if it already is). */
  whenDone(hook: (status: number) => void): void {
    // A copy of exact length, not push: a pushed-to array reserves 17 slots, held per reader.
    if (this.status === null) this.hooks = [...this.hooks, hook];
    else hook(this.status);
  }

  /** The response has been written (or its client has gone): runs the hooks, once. */
  done(status: number): void {
    if (this.status !== null) return;
    this.status = status;
    const hooks = this.hooks;
    this.hooks = [];
    for (const hook of hooks) hook(status);
  }
}

/**
 * Takes the response away from Koa: the chain returns, and the caller writes
 * `ctx.res` later (writeJson) and then calls `done`. The status reads 200 in
 * the meantime (Koa's default 404 would read as "no route").
 */
export function park(ctx: Context): ParkedResponse {
  const parked = new ParkedResponse();
  (ctx.state as Record<symbol, unknown>)[PARKED] = parked;
  ctx.respond = false;
  ctx.status = 200;
  return parked;
}

/** What owns a parked response and must know when its client goes away. */
export interface ClientGone {
  clientGone(): void;
}

const ownerOf = new WeakMap<ServerResponse, ClientGone>();

/**
 * The 'close' listener of every parked response (one function, not a closure
 * each). The response's 'close' fires on disconnect; the request's own
 * 'close' fires as soon as its body has been read.
 */
function onClientGone(this: ServerResponse): void {
  ownerOf.get(this)?.clientGone();
}

/**
 * Calls `owner.clientGone()` when the client of `res` goes away. A client
 * that left before this call has already closed: the caller checks
 * `res.destroyed` once its owner is running.
 */
export function watchClientGone(res: ServerResponse, owner: ClientGone): void {
  ownerOf.set(res, owner);
  res.on('close', onClientGone);
}

/** The owner of `res` is done with it: no more `clientGone()`. */
export function unwatchClientGone(res: ServerResponse): void {
  res.off('close', onClientGone);
  ownerOf.delete(res);
}

/** The request's parked response, if its handler parked it. */
export function parkedOf(ctx: Context): ParkedResponse | undefined {
  return (ctx.state as Record<symbol, ParkedResponse | undefined>)[PARKED];
}

/**
 * Writes a JSON body as Koa writes `ctx.body = value`: the headers set so far
 * (X-Request-Id, Cache-Control, rate limits, ...) then Content-Type and
 * Content-Length, the same bytes. Nothing is written to a response whose
 * client has gone.
 */
export function writeJson(res: ServerResponse, status: number, value: unknown): void {
  if (res.destroyed || res.writableEnded) return;
  const body = JSON.stringify(value);
  res.statusCode = status;
  if (!res.headersSent) {
    res.setHeader('Content-Type', 'application/json; charset=utf-8');
    res.setHeader('Content-Length', Buffer.byteLength(body));
  }
  res.end(body);
}
