/**
 * One HTTPS POST to a receiver, bounded in time and in what it may reach.
 *
 * The client is undici's: a pool of keep-alive connections per subscription
 * and receiver origin (scheme, host, port), at most `socketsPerOrigin` of
 * them. Subscriptions do not share connections, even to the same origin: a
 * receiver that hangs for one subscription holds that subscription's
 * connections only, and the others' requests never queue behind it (many
 * customers point webhooks at the same SaaS origin). A pool nothing was sent
 * through for IDLE_POOL_MS is closed. got, the stack's first choice, cost
 * ~10x the CPU per request (docs/decisions.md).
 *
 * An attempt has `timeoutMs` for its lookup, connect, handshake, the gate's
 * reads and the answer. The time its request waits in its pool for a
 * connection (behind the same subscription's other requests) is not part of
 * it: the attempt's clock stops while it waits. With a gate, a request that
 * waited `timeoutMs` without getting a connection is withdrawn unwritten and
 * send() resolves null, like a withheld request (the caller prepares it
 * again): nothing reached the receiver, so there is no attempt to report and
 * nothing to charge to the subscription's health.
 *
 * The connection goes only to an address checked at this moment: the URL's
 * literal IP is checked before anything is sent, and a name is resolved
 * before each send for the account that sends (the per-account cap on DNS
 * queries in flight; the resolver's cache makes it a map read when warm),
 * every address checked, the whole send refused if any is not allowed (so a
 * name re-pointed at an inside address after the subscription was created,
 * DNS rebinding, never reaches it). A new connection dials only addresses
 * that passed that check (checked again at the dial). Redirects are not
 * followed: a 3xx is a failed attempt. The resolver is c-ares
 * (shared/src/dns.ts), never dns.lookup: a slow DNS server must not hold
 * threads of the pool other work needs.
 *
 * Stored errors never name an address a name resolved to unless it is a
 * public one we were allowed to dial.
 *
 * A send may carry a gate, checked on the connection the request is about to
 * be written to (a reused keep-alive socket at once, a new one after its TLS
 * handshake), right before the request's first byte: when `ready()` answers
 * false the request is dropped unwritten (that connection is closed), the
 * gate's `refresh()` reads again, and the request is prepared again on a
 * connection that is up, or dropped (send() resolves null) when the state it
 * was signed for changed. The dispatcher uses it to check, after DNS,
 * connect and handshake took however long they took, that the subscription
 * it signs for is still as read (see shared/src/subscription-fence.ts). A
 * refresh that throws rejects send(): no request was written, so no attempt
 * is reported.
 */
import type { LookupAddress, LookupOneOptions } from 'node:dns';
import { isIP } from 'node:net';
import { createSecureContext, rootCertificates } from 'node:tls';
import { buildConnector, Client, Pool, type Dispatcher } from 'undici';
import { LOOKUP_LIMIT } from '#shared/dns.js';
import type { AttemptOutcome } from '#shared/mongo/index.js';
import { checkResolved, precheckUrl, redactAddresses, type LookupContext, type Resolver, type SafetyPolicy } from '#shared/url-safety.js';
import { parseRetryAfter } from './retry-policy.js';

export interface SendResult {
  status: number | null;
  outcome: AttemptOutcome;
  /** Short diagnostic when no status came back. */
  error: string | null;
  retryAfterMs: number | null;
  durationMs: number;
}

interface SenderOptions {
  policy: SafetyPolicy;
  resolve: Resolver;
  caPem: string | null;
  timeoutMs: number;
  userAgent: string;
  /** Connections one subscription keeps to one receiver origin (scheme, host, port); its requests beyond them wait their turn. */
  socketsPerOrigin?: number;
  /** A pool nothing was sent through for this long is closed (default IDLE_POOL_MS). */
  idlePoolMs?: number;
}

/** Whose send it is: the account (its cap on DNS queries in flight) and the subscription (its own connections). */
export interface SendContext extends LookupContext {
  subscription?: string;
}

/**
 * What a request was prepared under. `ready()` runs on the connection the
 * request is about to be written to, and must answer at once: may it be
 * written now? When it says no, `refresh(pending)` reads again: true, prepare
 * the request again; false, drop it (the state changed, or `pending()` turned
 * false: the attempt's time is over). A refresh that throws rejects send().
 */
export interface SendGate {
  ready(): boolean;
  refresh(pending: () => boolean): Promise<boolean>;
}

export interface Sender {
  /**
   * `ctx.account`: whose lookup this is (the per-account cap on DNS queries in flight);
   * `ctx.subscription`: whose connections it goes on (none: the origin's pool for sends of no subscription).
   * With a `gate`: null when nothing reached the receiver (the gate withheld the request,
   * or no connection of its pool came free within `timeoutMs`). Without one, a request
   * waits for its connection as long as that takes (each request ahead of it is bounded).
   */
  send(url: string, body: string, headers: Record<string, string>, ctx?: SendContext): Promise<SendResult>;
  send(url: string, body: string, headers: Record<string, string>, ctx: SendContext, gate: SendGate): Promise<SendResult | null>;
  /** Pools held now: one per (subscription, origin) used within the idle time. */
  pools(): number;
  close(): void;
}

/** Bytes of a response body we read (to keep the connection reusable) before hanging up. */
const MAX_RESPONSE_BYTES = 64 * 1024;

class BlockedAddressError extends Error {
  readonly code = 'ERR_BLOCKED_ADDRESS';
}

class TimeoutError extends Error {
  override readonly name = 'TimeoutError';
  readonly code = 'ETIMEDOUT';
}

/** A request dropped unwritten because its gate was not ready. */
const NOT_READY = new Error('the gate was not ready: dropped unwritten');

/** A request withdrawn while it waited for a connection: given to none. */
const WITHDRAWN = new Error('withdrawn while waiting for a connection');

/** A pool nothing was sent through for this long is closed (its connections are closed by then: keepAliveMaxTimeout). */
const IDLE_POOL_MS = 60_000;

/**
 * Set on a request's dispatch options: called when its pool hands it to a
 * connection (one already up, or one about to dial). False: the request was
 * withdrawn meanwhile and is given to no connection.
 */
const ON_CONNECTION = Symbol('on connection');
type HookedOptions = Dispatcher.DispatchOptions & { [ON_CONNECTION]?: () => boolean };

/** A pool's connection that tells each request when the pool hands it over (the end of its wait). */
function hookedClient(origin: URL, options: object): Dispatcher {
  const client = new Client(origin, options as Client.Options);
  const dispatch = client.dispatch.bind(client);
  client.dispatch = (o: HookedOptions, handler: Dispatcher.DispatchHandler): boolean => {
    const taken = o[ON_CONNECTION];
    if (taken && !taken()) {
      // Not handed over: the connection stays free for the next one waiting.
      handler.onError?.(WITHDRAWN);
      return true;
    }
    return dispatch(o, handler);
  };
  return client;
}

/**
 * An attempt's time limit: a clock that runs while the attempt is the
 * receiver's business and stops while its request waits for a connection.
 */
class AttemptClock {
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

/** One subscription's connections to one origin, and when it was last used. */
interface PoolEntry {
  pool: Pool;
  /** Requests given to the pool whose handler has not finished yet. */
  inFlight: number;
  lastUsed: number;
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address?: string | LookupAddress[], family?: number) => void;

const TLS_CODE = /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_|EPROTO$|HOSTNAME_MISMATCH)/;
const DNS_CODES = new Set(['ENOTFOUND', 'EAI_AGAIN', 'ENODATA', 'ESERVFAIL', 'EAI_NONAME', 'ENONAME', 'EAI_NODATA', 'ETIMEOUT', 'EREFUSED', 'ECANCELLED', LOOKUP_LIMIT]);
const TIMEOUT_CODES = new Set(['ETIMEDOUT', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

/** A certificate no trusted CA signed (self-signed, or an issuer the process does not know). */
const UNTRUSTED_ISSUER = /^(DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|UNABLE_TO_VERIFY_LEAF_SIGNATURE|UNABLE_TO_GET_ISSUER_CERT(_LOCALLY)?)$/;
const CA_HINT = ' (trusted: the public CAs and those in WEBHOOK_CA_FILE)';

/**
 * Maps a failed request to the outcome codes we store. Inside addresses in the text are
 * redacted, except in a TLS error when private targets are allowed (development only: the
 * addresses are the developer's own, and which one the certificate names is the point).
 */
function classifyError(err: unknown, allowPrivate: boolean): { outcome: AttemptOutcome; error: string } {
  const e = err as { code?: string; name?: string; message?: string };
  const code = e.code ?? '';
  const text = `${code || e.name || 'error'}: ${e.message ?? ''}`;
  const error = redactAddresses(text).slice(0, 200);
  if (code === 'ERR_BLOCKED_ADDRESS') return { outcome: 'blocked_address', error };
  if (e.name === 'TimeoutError' || TIMEOUT_CODES.has(code)) return { outcome: 'timeout', error };
  if (DNS_CODES.has(code)) return { outcome: 'dns', error };
  if (TLS_CODE.test(code) || /certificate|tls|ssl/i.test(e.message ?? '')) {
    const shown = (allowPrivate ? text : error).slice(0, 200 - CA_HINT.length);
    return { outcome: 'tls', error: UNTRUSTED_ISSUER.test(code) ? shown + CA_HINT : shown };
  }
  return { outcome: 'connect', error };
}

function outcomeOf(status: number): AttemptOutcome {
  if (status >= 200 && status < 300) return 'ok';
  if (status >= 300 && status < 400) return 'http_3xx';
  if (status >= 400 && status < 500) return 'http_4xx';
  return 'http_5xx';
}

/** Where a URL goes, worked out once per URL: refused before any socket, or the origin, path and (for a name) the name to resolve. */
type Target = { blocked: string } | { origin: string; path: string; name: string | null };

function targetOf(url: string, policy: SafetyPolicy): Target {
  // Scheme, port, host name rules, literal IP: the URL string and the policy alone decide these.
  const checked = precheckUrl(url, policy);
  if ('verdict' in checked) return { blocked: checked.verdict.message };
  const u = new URL(url);
  const host = u.hostname.replace(/^\[|\]$/g, '');
  return { origin: u.origin, path: `${u.pathname}${u.search}`, name: isIP(host) ? null : host };
}

const noAddress = (name: string): Error => Object.assign(new Error(`no address for ${name}`), { code: 'ENOTFOUND' });

/** Why a name's addresses may not be dialled (one not allowed, or none at all); null when they may. */
function refusalOf(name: string, addresses: string[], policy: SafetyPolicy): Error | null {
  for (const address of addresses) {
    const verdict = checkResolved(name, address, policy);
    if (!verdict.ok) return new BlockedAddressError(verdict.message);
  }
  return addresses.length === 0 ? noAddress(name) : null;
}

/** Caches per URL or name stay bounded: emptied when full (they refill from the next sends). */
function remember<K, V>(cache: Map<K, V>, key: K, value: V): V {
  if (cache.size >= 10_000) cache.clear();
  cache.set(key, value);
  return value;
}

type Round = { kind: 'response'; status: number; headers: Record<string, string | string[] | undefined> } | { kind: 'error'; err: unknown } | { kind: 'not-ready' } | { kind: 'no-connection' };

export function createSender(opts: SenderOptions): Sender {
  // An extra CA goes into ONE secure context shared by every connection: built per
  // connection, Node parsed the ~140 root certificates each time (60% of this process's
  // CPU in the bench).
  const secureContext = opts.caPem ? createSecureContext({ ca: [...rootCertificates, opts.caPem] }) : undefined;

  // The addresses each name last resolved to for a send, every one of them allowed. A new
  // connection dials these (checked again), so the connection's lookup is never the first
  // query of a name, and its queries are the sending account's.
  const checked = new Map<string, string[]>();
  const dialLookup = (hostname: string, options: LookupOneOptions & { all?: boolean }, callback: LookupCallback): void => {
    const known = checked.get(hostname);
    const addresses = known ? Promise.resolve(known) : opts.resolve(hostname, {});
    addresses.then(
      (list) => {
        const refused = refusalOf(hostname, list, opts.policy);
        if (refused) return callback(refused);
        const all: LookupAddress[] = list.map((address) => ({ address, family: address.includes(':') ? 6 : 4 })).filter((a) => !options.family || a.family === options.family);
        const first = all[0];
        if (!first) return callback(noAddress(hostname));
        if (options.all) return callback(null, all);
        callback(null, first.address, first.family);
      },
      (err: NodeJS.ErrnoException) => callback(err),
    );
  };
  const connect = buildConnector({ ...(secureContext ? { secureContext } : {}), lookup: dialLookup, timeout: opts.timeoutMs } as buildConnector.BuildOptions);
  const newPool = (origin: string): Pool =>
    new Pool(origin, {
      connect,
      connections: opts.socketsPerOrigin ?? 128,
      pipelining: 1,
      // Idle connections are kept this long unless the receiver's Keep-Alive header says less.
      keepAliveTimeout: 30_000,
      keepAliveMaxTimeout: 60_000,
      headersTimeout: opts.timeoutMs,
      bodyTimeout: opts.timeoutMs,
      factory: hookedClient,
    });

  // One pool per (subscription, origin); idle ones closed, so memory follows the pairs in use.
  const pools = new Map<string, PoolEntry>();
  const closeIdle = (idleMs: number): void => {
    const now = performance.now();
    for (const [key, entry] of pools) {
      if (entry.inFlight > 0 || now - entry.lastUsed < idleMs) continue;
      pools.delete(key);
      entry.pool.destroy().catch(() => {});
    }
  };
  const idlePoolMs = opts.idlePoolMs ?? IDLE_POOL_MS;
  const sweeper = setInterval(() => closeIdle(idlePoolMs), idlePoolMs / 2);
  sweeper.unref();
  const poolFor = (subscription: string, origin: string): PoolEntry => {
    const key = `${subscription}\n${origin}`;
    let entry = pools.get(key);
    if (!entry) {
      if (pools.size >= 10_000) closeIdle(0);
      entry = { pool: newPool(origin), inFlight: 0, lastUsed: 0 };
      pools.set(key, entry);
    }
    entry.lastUsed = performance.now();
    return entry;
  };

  const outOfTime = (): TimeoutError => new TimeoutError(`no answer within ${opts.timeoutMs} ms`);
  const targets = new Map<string, Target>();
  const targetOnce = (url: string): Target => {
    return targets.get(url) ?? remember(targets, url, targetOf(url, opts.policy));
  };

  /** Resolves a name for `ctx.account` and checks every address; throws what the attempt fails with. */
  async function checkName(name: string, ctx: SendContext): Promise<void> {
    const { subscription: _subscription, ...lookup } = ctx;
    const addresses = await opts.resolve(name, lookup);
    const refused = refusalOf(name, addresses, opts.policy);
    if (refused) throw refused;
    remember(checked, name, addresses);
  }

  /**
   * One request on one connection of `entry`'s pool; `over` aborts it (the attempt's time is up).
   * The clock stops while the request waits for a connection; with `waitMs`, a request still
   * waiting then is withdrawn ('no-connection': given to no connection, nothing written).
   */
  function round(
    target: { origin: string; path: string },
    body: string,
    headers: Record<string, string>,
    gate: SendGate | undefined,
    over: { aborted: boolean; abort?: () => void },
    clock: AttemptClock,
    entry: PoolEntry,
    waitMs: number | null,
  ): Promise<Round> {
    return new Promise<Round>((resolve) => {
      let done = false;
      let released = false;
      let read = 0;
      let waiting: NodeJS.Timeout | null = null;
      const finish = (r: Round): void => {
        if (done) return;
        done = true;
        over.abort = undefined;
        if (waiting) clearTimeout(waiting);
        resolve(r);
      };
      // The pool is done with the request (answered, failed, or let go after its withdrawal).
      const letGo = (): void => {
        if (released) return;
        released = true;
        entry.inFlight--;
        entry.lastUsed = performance.now();
      };
      // The attempt's answer is the status, but the round ends with the body (read, up to a limit, so
      // the connection is free for the next request the moment the round ends); a body cut short,
      // over the limit or out of time leaves the status standing.
      let answer: Round | null = null;
      const handler: Dispatcher.DispatchHandler = {
        onRequestStart(controller) {
          over.abort = () => controller.abort(outOfTime());
          if (over.aborted) return controller.abort(outOfTime());
          // The connection is up: the last moment before the first byte.
          if (gate && !gate.ready()) controller.abort(NOT_READY);
        },
        onResponseStart(_controller, statusCode, resHeaders) {
          if (statusCode >= 200) answer = { kind: 'response', status: statusCode, headers: resHeaders }; // 1xx: still to come
        },
        onResponseData(controller, chunk) {
          read += chunk.length;
          if (read > MAX_RESPONSE_BYTES) controller.abort(new Error('response body over the limit'));
        },
        onResponseEnd() {
          letGo();
          if (answer) finish(answer);
        },
        onResponseError(_controller, err) {
          letGo();
          finish(answer ?? (err === NOT_READY ? { kind: 'not-ready' } : { kind: 'error', err }));
        },
      };
      const options: HookedOptions = {
        origin: target.origin,
        path: target.path,
        method: 'POST',
        headers: { 'user-agent': opts.userAgent, 'content-type': 'application/json', ...headers },
        body,
        // Handed to a connection: the wait is over and the clock runs again (connect and handshake count).
        [ON_CONNECTION]: () => {
          if (done) return false;
          if (waiting) clearTimeout(waiting);
          waiting = null;
          clock.run();
          return true;
        },
      };
      clock.stop();
      if (waitMs !== null) waiting = setTimeout(() => finish({ kind: 'no-connection' }), waitMs);
      entry.inFlight++;
      try {
        entry.pool.dispatch(options, handler);
      } catch (err) {
        letGo();
        finish({ kind: 'error', err });
      }
    });
  }

  async function send(url: string, body: string, headers: Record<string, string>, ctx: SendContext = {}, gate?: SendGate): Promise<SendResult | null> {
    // One limit for the whole attempt: lookup, connect, handshake, the gate's reads, the answer
    // (not the wait for a connection: the clock stops then).
    const over: { aborted: boolean; abort?: () => void } = { aborted: false };
    let timedOut: () => void = () => {};
    const deadline = new Promise<'over'>((resolve) => (timedOut = () => resolve('over')));
    const clock = new AttemptClock(opts.timeoutMs, () => {
      over.aborted = true;
      over.abort?.();
      timedOut();
    });
    const elapsed = (): number => Math.round(clock.spentMs);
    const failed = (err: unknown): SendResult => ({ status: null, ...classifyError(err, opts.policy.allowPrivate), retryAfterMs: null, durationMs: elapsed() });
    const timeout = (): SendResult => failed(outOfTime());
    const pending = (): boolean => !over.aborted && !finished;
    let finished = false;
    try {
      const target = targetOnce(url);
      if ('blocked' in target) return { status: null, outcome: 'blocked_address', error: target.blocked, retryAfterMs: null, durationMs: elapsed() };
      if (target.name) {
        const looked = await Promise.race([checkName(target.name, ctx).then(() => null, (err: unknown) => failed(err)), deadline]);
        if (looked === 'over') return timeout();
        if (looked) return looked;
      }
      for (;;) {
        const entry = poolFor(ctx.subscription ?? '', target.origin);
        const r = await Promise.race([round(target, body, headers, gate, over, clock, entry, gate ? opts.timeoutMs : null), deadline]);
        if (r === 'over') return timeout();
        // Waited its whole limit for a connection: nothing was written, nothing is charged.
        if (r.kind === 'no-connection') return null;
        if (r.kind === 'error') return over.aborted ? timeout() : failed(r.err);
        if (r.kind === 'response') {
          const retryAfter = r.headers['retry-after'];
          return { status: r.status, outcome: outcomeOf(r.status), error: null, retryAfterMs: parseRetryAfter(Array.isArray(retryAfter) ? retryAfter[0] : retryAfter, new Date()), durationMs: elapsed() };
        }
        // Not ready on the connection it was to be written to: read again, then prepare it again or drop it.
        const again = await Promise.race([(gate as SendGate).refresh(pending), deadline]);
        if (again === 'over') return timeout();
        if (!again) return null;
      }
    } finally {
      finished = true;
      clock.end();
    }
  }

  return {
    send: send as Sender['send'],
    pools: () => pools.size,
    close: () => {
      clearInterval(sweeper);
      for (const entry of pools.values()) entry.pool.destroy().catch(() => {});
      pools.clear();
    },
  };
}
