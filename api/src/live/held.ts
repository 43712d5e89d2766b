/**
 * Held readers: a long-poll waiting for its event, an SSE stream between
 * writes. A reader may be held up to 55 s, so whatever it keeps alive is
 * multiplied by every reader a process holds. This module owns what every
 * held reader shares, one type per concept:
 *
 * - `HeldReader`: what is held; it ends at its deadline (`expire`) or when
 *   its client leaves (`clientGone`), besides its own ending (an event, the
 *   stream's end).
 * - `DeadlineWheel` (deadlines): many readers' deadlines on few timers.
 * - `LongPollCap` (the per-account cap): long-polls one account may hold.
 * - `ParkedResponse` (parking): a request whose answer comes later leaves
 *   Koa's middleware chain with Koa's supported escape, `ctx.respond = false`,
 *   and is written on its raw response, with the bytes Koa would write. It
 *   also watches its client: one `'close'` listener for every parked
 *   response of the process, not a closure each.
 * - `HeldReaders`: one per process (`deps.held`), holding the three above.
 *
 * A held reader keeps no promise, timer or closure of its own: its waiter
 * wakes it through a listener object, the wheel times it out, the client-gone
 * listener finds it by its response.
 *
 * What a middleware does once a response is done (the request metric, the
 * request log, the span) it registers with `whenDone` when it finds the
 * request parked, and runs with the status the response was finally written
 * with. A handler parks last: nothing may throw after `park` (Koa no longer
 * writes the response, so an error could not be rendered).
 */
import type { ServerResponse } from 'node:http';
import type { Context } from 'koa';
import { AppError } from '#shared/errors/index.js';

/** A held reader: ends at its deadline or when its client leaves. */
export interface HeldReader {
  /** Its deadline (or the next time it has something to do) has come. */
  expire(): void;
  /** Its client has gone (or, for the MCP tool, the caller stopped waiting). */
  clientGone(): void;
}

interface Bucket {
  items: Set<HeldReader>;
  timer: NodeJS.Timeout;
}

/**
 * Deadlines of many held readers on few timers. A deadline is rounded up to
 * the next multiple of the wheel's resolution, and every reader of one such
 * bucket shares its timer: 10,000 long-polls opened within a few seconds
 * hold a few hundred timers, not 10,000 timers and their closures.
 */
export class DeadlineWheel {
  private readonly buckets = new Map<number, Bucket>();
  private count = 0;

  /** @param resolutionMs how late past its deadline an item may expire (never early). */
  constructor(private readonly resolutionMs: number) {}

  /**
   * Expires `item` at `deadline` (epoch ms) or up to one resolution later.
   * Returns the bucket it joined: pass it back to `remove`.
   */
  add(item: HeldReader, deadline: number): number {
    const at = Math.ceil(deadline / this.resolutionMs) * this.resolutionMs;
    let bucket = this.buckets.get(at);
    if (!bucket) {
      bucket = { items: new Set(), timer: setTimeout(this.fire, Math.max(0, at - Date.now()), at) };
      this.buckets.set(at, bucket);
    }
    if (!bucket.items.has(item)) {
      bucket.items.add(item);
      this.count += 1;
    }
    return at;
  }

  /** Forgets `item` (no-op when it has expired or was never added); the last item of a bucket takes its timer with it. */
  remove(item: HeldReader, bucketAt: number): void {
    const bucket = this.buckets.get(bucketAt);
    if (!bucket?.items.delete(item)) return;
    this.count -= 1;
    if (bucket.items.size > 0) return;
    clearTimeout(bucket.timer);
    this.buckets.delete(bucketAt);
  }

  /** Items waiting for their deadline. */
  get size(): number {
    return this.count;
  }

  /** Timers running (one per bucket in use). */
  get timers(): number {
    return this.buckets.size;
  }

  private readonly fire = (at: number): void => {
    const bucket = this.buckets.get(at);
    if (!bucket) return;
    this.buckets.delete(at);
    this.count -= bucket.items.size;
    for (const item of bucket.items) item.expire();
  };
}

/**
 * Long-polls held per account in this process. The count lives in this
 * process only: behind a load balancer with k API processes an account may
 * hold up to k x the cap in all (README "Security"); what the cap bounds is
 * the memory and sockets one account can pin in one process.
 */
export class LongPollCap {
  private readonly counts = new Map<string, number>();

  constructor(private readonly cap: number) {}

  /** Takes one of the account's slots, or refuses with 429 naming the cap. Give it back with `release`, once. */
  hold(accountId: string): void {
    const now = this.counts.get(accountId) ?? 0;
    if (now >= this.cap) {
      throw new AppError('rate_limited', `Too many long-polls open for this account: at most ${this.cap} at once per API process; close one or retry shortly`, undefined, { 'Retry-After': '1' });
    }
    this.counts.set(accountId, now + 1);
  }

  /** Gives back a slot `hold` took (the caller makes sure it does so once: no closure per long-poll). */
  release(accountId: string): void {
    const left = (this.counts.get(accountId) ?? 1) - 1;
    if (left <= 0) this.counts.delete(accountId);
    else this.counts.set(accountId, left);
  }

  /** Long-polls `accountId` holds in this process. */
  held(accountId: string): number {
    return this.counts.get(accountId) ?? 0;
  }
}

const PARKED = Symbol('parked response');

/**
 * A request taken away from Koa (`park`): the chain has returned, and its
 * reader writes the raw response later, once (`answer` or `end`).
 */
export class ParkedResponse {
  private hooks: ((status: number) => void)[] = [];
  private status: number | null = null;

  constructor(
    readonly res: ServerResponse,
    private readonly readers: HeldReaders,
  ) {}

  /** Runs `hook` with the final status once the response is written (at once if it already is). */
  whenDone(hook: (status: number) => void): void {
    // A copy of exact length, not push: a pushed-to array reserves 17 slots, held per reader.
    if (this.status === null) this.hooks = [...this.hooks, hook];
    else hook(this.status);
  }

  /** The response has ended (`end`, `answer`). */
  get ended(): boolean {
    return this.status !== null;
  }

  /** Writes `value` as a 200 JSON answer and ends the request (a long-poll's answer). */
  answer(value: unknown): void {
    this.end(200, value);
  }

  /**
   * The reader is done: no more `clientGone`; `body` (when given) is written
   * as JSON with `status`, unless the client has gone; the hooks run, once.
   */
  end(status: number, body?: unknown): void {
    if (this.status !== null) return;
    this.readers.unwatch(this.res);
    if (body !== undefined) writeJson(this.res, status, body);
    this.status = status;
    const hooks = this.hooks;
    this.hooks = [];
    for (const hook of hooks) hook(status);
  }
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
function writeJson(res: ServerResponse, status: number, value: unknown): void {
  if (res.destroyed || res.writableEnded) return;
  const body = JSON.stringify(value);
  res.statusCode = status;
  if (!res.headersSent) {
    res.setHeader('Content-Type', 'application/json; charset=utf-8');
    res.setHeader('Content-Length', Buffer.byteLength(body));
  }
  res.end(body);
}

/** Built once per process: the deadline wheel, the long-poll cap and the parked responses' client watch. */
export class HeldReaders {
  readonly deadlines: DeadlineWheel;
  readonly longPolls: LongPollCap;
  /** The reader of each parked response, for the one 'close' listener. */
  private readonly owners = new WeakMap<ServerResponse, HeldReader>();
  /**
   * The 'close' listener of every parked response (one function per process,
   * not a closure per reader). The response's 'close' fires on disconnect;
   * the request's own 'close' fires as soon as its body has been read.
   */
  private readonly onClose: (this: ServerResponse) => void;

  constructor(opts: { deadlineResolutionMs: number; maxLongPollsPerAccount: number }) {
    this.deadlines = new DeadlineWheel(opts.deadlineResolutionMs);
    this.longPolls = new LongPollCap(opts.maxLongPollsPerAccount);
    const owners = this.owners;
    this.onClose = function onClientGone(this: ServerResponse): void {
      owners.get(this)?.clientGone();
    };
  }

  /**
   * Takes the response away from Koa (`ctx.respond = false`): the chain
   * returns, and the reader writes it later through the ParkedResponse. Its
   * status reads 200 meanwhile (Koa's default 404 would read as "no route").
   */
  park(ctx: Context): ParkedResponse {
    const parked = new ParkedResponse(ctx.res, this);
    (ctx.state as Record<symbol, unknown>)[PARKED] = parked;
    ctx.respond = false;
    ctx.status = 200;
    return parked;
  }

  /**
   * Calls `reader.clientGone()` when the client of `parked` leaves, until
   * the response ends; at once when it has already left (while the request
   * was authenticated or the reader prepared: its 'close' event is gone).
   * Call it once the reader is running; a reader that has already answered
   * is not watched.
   */
  watch(parked: ParkedResponse, reader: HeldReader): void {
    if (parked.ended) return;
    this.owners.set(parked.res, reader);
    parked.res.on('close', this.onClose);
    if (parked.res.destroyed) reader.clientGone();
  }

  /** The response has ended: no more `clientGone` (ParkedResponse.end). */
  unwatch(res: ServerResponse): void {
    res.off('close', this.onClose);
    this.owners.delete(res);
  }
}
