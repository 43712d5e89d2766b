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
import { isIP } from 'node:net';
import { LOOKUP_LIMIT } from '#shared/dns.js';
import type { AttemptOutcome } from '#shared/mongo/index.js';
import { precheckUrl, redactAddresses, type LookupContext, type Resolver, type SafetyPolicy } from '#shared/url-safety.js';
import { parseRetryAfter } from './retry-policy.js';
import { AttemptClock, round, type RoundRequest } from './send-round.js';
import { remember, SenderPools } from './send-pools.js';

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

class TimeoutError extends Error {
  override readonly name = 'TimeoutError';
  readonly code = 'ETIMEDOUT';
}

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

export function createSender(opts: SenderOptions): Sender {
  const pools = new SenderPools(opts);
  const outOfTime = (): TimeoutError => new TimeoutError(`no answer within ${opts.timeoutMs} ms`);
  const targets = new Map<string, Target>();
  const targetOnce = (url: string): Target => {
    return targets.get(url) ?? remember(targets, url, targetOf(url, opts.policy));
  };

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
        const looked = await Promise.race([pools.checkName(target.name, ctx).then(() => null, (err: unknown) => failed(err)), deadline]);
        if (looked === 'over') return timeout();
        if (looked) return looked;
      }
      const req: RoundRequest = { target, body, headers, userAgent: opts.userAgent, gate, over, clock, outOfTime };
      for (;;) {
        const entry = pools.poolFor(ctx.subscription ?? '', target.origin);
        const r = await Promise.race([round(req, entry, gate ? opts.timeoutMs : null), deadline]);
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
    close: () => pools.close(),
  };
}
