/**
 * One HTTPS POST to a receiver, bounded in time and in what it may reach.
 *
 * The client is undici's (an Agent: a pool of keep-alive connections per
 * receiver origin, at most `socketsPerOrigin` of them). got, the stack's
 * first choice, cost ~10x the CPU per request (docs/decisions.md).
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
import { Agent, buildConnector, type Dispatcher } from 'undici';
import { LOOKUP_LIMIT } from '../../shared/src/dns.js';
import type { AttemptOutcome } from '../../shared/src/mongo/index.js';
import { checkResolved, precheckUrl, redactAddresses, type LookupContext, type Resolver, type SafetyPolicy } from '../../shared/src/url-safety.js';
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
  /** Connections kept to one receiver origin (scheme, host, port); requests beyond them wait their turn. */
  socketsPerOrigin?: number;
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
   * `ctx.account`: whose lookup this is (the per-account cap on DNS queries in flight).
   * With a `gate`: null when the gate withheld the request (nothing reached the receiver).
   */
  send(url: string, body: string, headers: Record<string, string>, ctx?: LookupContext): Promise<SendResult>;
  send(url: string, body: string, headers: Record<string, string>, ctx: LookupContext, gate: SendGate): Promise<SendResult | null>;
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

type LookupCallback = (err: NodeJS.ErrnoException | null, address?: string | LookupAddress[], family?: number) => void;

const TLS_CODE = /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_|EPROTO$|HOSTNAME_MISMATCH)/;
const DNS_CODES = new Set(['ENOTFOUND', 'EAI_AGAIN', 'ENODATA', 'ESERVFAIL', 'EAI_NONAME', 'ENONAME', 'EAI_NODATA', 'ETIMEOUT', 'EREFUSED', 'ECANCELLED', LOOKUP_LIMIT]);
const TIMEOUT_CODES = new Set(['ETIMEDOUT', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

/** Maps a failed request to the outcome codes we store. */
function classifyError(err: unknown): { outcome: AttemptOutcome; error: string } {
  const e = err as { code?: string; name?: string; message?: string };
  const code = e.code ?? '';
  const error = redactAddresses(`${code || e.name || 'error'}: ${e.message ?? ''}`).slice(0, 200);
  if (code === 'ERR_BLOCKED_ADDRESS') return { outcome: 'blocked_address', error };
  if (e.name === 'TimeoutError' || TIMEOUT_CODES.has(code)) return { outcome: 'timeout', error };
  if (DNS_CODES.has(code)) return { outcome: 'dns', error };
  if (TLS_CODE.test(code) || /certificate|tls|ssl/i.test(e.message ?? '')) return { outcome: 'tls', error };
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

type Round = { kind: 'response'; status: number; headers: Record<string, string | string[] | undefined> } | { kind: 'error'; err: unknown } | { kind: 'not-ready' };

export function createSender(opts: SenderOptions): Sender {
  // An extra CA goes into ONE secure context shared by every connection: built per
  // connection, Node parsed the ~140 root certificates each time (60% of this process's
  // CPU in the bench, session 4).
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
  const agent = new Agent({
    connect,
    connections: opts.socketsPerOrigin ?? 128,
    pipelining: 1,
    // Idle connections are kept this long unless the receiver's Keep-Alive header says less.
    keepAliveTimeout: 30_000,
    keepAliveMaxTimeout: 60_000,
    headersTimeout: opts.timeoutMs,
    bodyTimeout: opts.timeoutMs,
  });

  const outOfTime = (): TimeoutError => new TimeoutError(`no answer within ${opts.timeoutMs} ms`);
  const targets = new Map<string, Target>();
  const targetOnce = (url: string): Target => {
    return targets.get(url) ?? remember(targets, url, targetOf(url, opts.policy));
  };

  /** Resolves a name for `ctx.account` and checks every address; throws what the attempt fails with. */
  async function checkName(name: string, ctx: LookupContext): Promise<void> {
    const addresses = await opts.resolve(name, ctx);
    const refused = refusalOf(name, addresses, opts.policy);
    if (refused) throw refused;
    remember(checked, name, addresses);
  }

  /** One request on one connection; `over` aborts it (the attempt's time is up). */
  function round(target: { origin: string; path: string }, body: string, headers: Record<string, string>, gate: SendGate | undefined, over: { aborted: boolean; abort?: () => void }): Promise<Round> {
    return new Promise<Round>((resolve) => {
      let done = false;
      let read = 0;
      const finish = (r: Round): void => {
        if (done) return;
        done = true;
        over.abort = undefined;
        resolve(r);
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
          if (answer) finish(answer);
        },
        onResponseError(_controller, err) {
          finish(answer ?? (err === NOT_READY ? { kind: 'not-ready' } : { kind: 'error', err }));
        },
      };
      try {
        agent.dispatch({ origin: target.origin, path: target.path, method: 'POST', headers: { 'user-agent': opts.userAgent, 'content-type': 'application/json', ...headers }, body }, handler);
      } catch (err) {
        finish({ kind: 'error', err });
      }
    });
  }

  async function send(url: string, body: string, headers: Record<string, string>, ctx: LookupContext = {}, gate?: SendGate): Promise<SendResult | null> {
    const started = performance.now();
    const elapsed = (): number => Math.round(performance.now() - started);
    const failed = (err: unknown): SendResult => ({ status: null, ...classifyError(err), retryAfterMs: null, durationMs: elapsed() });
    const target = targetOnce(url);
    if ('blocked' in target) return { status: null, outcome: 'blocked_address', error: target.blocked, retryAfterMs: null, durationMs: elapsed() };

    // One limit for the whole attempt: lookup, connect, handshake, the gate's reads, the answer.
    const over: { aborted: boolean; abort?: () => void } = { aborted: false };
    let timedOut: () => void = () => {};
    const deadline = new Promise<'over'>((resolve) => (timedOut = () => resolve('over')));
    const timer = setTimeout(() => {
      over.aborted = true;
      over.abort?.();
      timedOut();
    }, opts.timeoutMs);
    const timeout = (): SendResult => failed(outOfTime());
    const pending = (): boolean => !over.aborted && !finished;
    let finished = false;
    try {
      if (target.name) {
        const looked = await Promise.race([checkName(target.name, ctx).then(() => null, (err: unknown) => failed(err)), deadline]);
        if (looked === 'over') return timeout();
        if (looked) return looked;
      }
      for (;;) {
        const r = await Promise.race([round(target, body, headers, gate, over), deadline]);
        if (r === 'over') return timeout();
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
      clearTimeout(timer);
    }
  }

  return {
    send: send as Sender['send'],
    close: () => {
      agent.destroy().catch(() => {});
    },
  };
}
