/**
 * One HTTPS POST to a receiver, bounded in time and in what it may reach.
 *
 * The connection goes only to an address checked at this moment: the URL's
 * literal IP is checked before anything is sent, and a name is resolved by
 * our own lookup, which refuses the whole attempt if any address it got is
 * not allowed (so a name re-pointed at an inside address after the
 * subscription was created, DNS rebinding, never reaches it). Redirects are
 * not followed: a 3xx is a failed attempt. The resolver is c-ares
 * (shared/src/dns.ts), never dns.lookup: a slow DNS server must not hold
 * threads of the pool other work needs.
 *
 * Stored errors never name an address a name resolved to unless it is a
 * public one we were allowed to dial.
 *
 * A send may carry a gate: it runs once the connection is up (a reused
 * keep-alive socket at once, a new one after its TLS handshake), right
 * before the request's first byte is written; when it answers false the
 * request is dropped unwritten and send() resolves null. The dispatcher uses
 * it to check, after DNS, connect and handshake took however long they took,
 * that the subscription it signs for is still as read (see
 * shared/src/subscription-fence.ts). A gate that throws rejects send(): no
 * request was written, so no attempt is reported.
 */
import https from 'node:https';
import type { LookupAddress, LookupOneOptions } from 'node:dns';
import type { ClientRequest } from 'node:http';
import type { Socket } from 'node:net';
import { createSecureContext, rootCertificates, TLSSocket } from 'node:tls';
import got, { type Got } from 'got';
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
}

/**
 * Answers whether the request may be written now; false drops it unwritten.
 * `pending()` turns false once the send is over without it (the attempt's
 * timeout): a gate still checking can stop.
 */
export type SendGate = (pending: () => boolean) => Promise<boolean>;

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

type LookupCallback = (err: NodeJS.ErrnoException | null, address?: string | LookupAddress[], family?: number) => void;

/** A dns.lookup replacement for the socket: resolve, check every address, hand back only checked ones. */
function safeLookup(resolve: Resolver, policy: SafetyPolicy, ctx: LookupContext = {}) {
  return (hostname: string, options: LookupOneOptions & { all?: boolean }, callback: LookupCallback): void => {
    resolve(hostname, ctx).then(
      (addresses) => {
        for (const address of addresses) {
          const verdict = checkResolved(hostname, address, policy);
          if (!verdict.ok) return callback(new BlockedAddressError(verdict.message));
        }
        const all: LookupAddress[] = addresses
          .map((address) => ({ address, family: address.includes(':') ? 6 : 4 }))
          .filter((a) => !options.family || a.family === options.family);
        const first = all[0];
        if (!first) return callback(Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' }));
        if (options.all) return callback(null, all);
        callback(null, first.address, first.family);
      },
      (err: NodeJS.ErrnoException) => callback(err),
    );
  };
}

const TLS_CODE = /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_|EPROTO$|HOSTNAME_MISMATCH)/;
const DNS_CODES = new Set(['ENOTFOUND', 'EAI_AGAIN', 'ENODATA', 'ESERVFAIL', 'EAI_NONAME', 'ENONAME', 'EAI_NODATA', 'ETIMEOUT', 'EREFUSED', 'ECANCELLED', LOOKUP_LIMIT]);

/** Maps a failed request to the outcome codes we store. */
function classifyError(err: unknown): { outcome: AttemptOutcome; error: string } {
  const e = err as { code?: string; name?: string; message?: string };
  const code = e.code ?? '';
  const error = redactAddresses(`${code || e.name || 'error'}: ${e.message ?? ''}`).slice(0, 200);
  if (code === 'ERR_BLOCKED_ADDRESS') return { outcome: 'blocked_address', error };
  if (e.name === 'TimeoutError' || code === 'ETIMEDOUT') return { outcome: 'timeout', error };
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

/** Checks done before any socket is opened: scheme, port, host name rules, literal IP. */
function precheck(url: string, policy: SafetyPolicy): string | null {
  const checked = precheckUrl(url, policy);
  return 'verdict' in checked ? checked.verdict.message : null;
}

export function createSender(opts: SenderOptions): Sender {
  // Keep-alive: many deliveries to one receiver reuse a connection (and its TLS session).
  // A reused socket stays connected to the address that was checked when it opened.
  // An extra CA goes into ONE secure context shared by every connection. Given per
  // request (got's certificateAuthority), Node built a context per TLS connection and
  // parsed the ~140 root certificates each time: 60% of this process's CPU in the bench.
  const secureContext = opts.caPem ? createSecureContext({ ca: [...rootCertificates, opts.caPem] }) : undefined;
  const agent = new https.Agent({ keepAlive: true, maxFreeSockets: 256, scheduling: 'lifo', timeout: 30_000, ...(secureContext ? { secureContext } : {}) });
  const client: Got = got.extend({
    agent: { https: agent },
    timeout: { request: opts.timeoutMs },
    retry: { limit: 0 },
    followRedirect: false,
    throwHttpErrors: false,
    decompress: false,
    http2: false,
    headers: { 'user-agent': opts.userAgent },
  });

  // The checks before any socket (scheme, port, name rules, literal IP) depend on the URL
  // string and the policy alone: once per URL, not per attempt (~3% of a delivery's CPU).
  const prechecked = new Map<string, string | null>();
  const precheckOnce = (url: string): string | null => {
    let blocked = prechecked.get(url);
    if (blocked === undefined) {
      blocked = precheck(url, opts.policy);
      if (prechecked.size >= 10_000) prechecked.clear();
      prechecked.set(url, blocked);
    }
    return blocked;
  };

  async function send(url: string, body: string, headers: Record<string, string>, ctx: LookupContext = {}, gate?: SendGate): Promise<SendResult | null> {
    const started = performance.now();
    const elapsed = (): number => Math.round(performance.now() - started);
    const blocked = precheckOnce(url);
    if (blocked) return { status: null, outcome: 'blocked_address', error: blocked, retryAfterMs: null, durationMs: elapsed() };
    return new Promise<SendResult | null>((resolve, reject) => {
      let settled = false;
      // No body option: Node writes the request line and headers with the body's first
      // write, so nothing leaves this process before write() below (after the gate).
      const stream = client.stream.post(url, {
        headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), ...headers },
        dnsLookup: safeLookup(opts.resolve, opts.policy, ctx) as never,
      });
      const write = (): void => {
        if (!gate) return void stream.end(body);
        gate(() => !settled && !stream.destroyed).then(
          (open) => {
            if (stream.destroyed || settled) return;
            if (open) return void stream.end(body);
            settled = true;
            stream.destroy();
            resolve(null);
          },
          (err: unknown) => {
            // The gate could not tell (its store read failed): nothing was sent, so this is no
            // attempt of the receiver's; the caller's error path hands the delivery back.
            if (settled) return;
            settled = true;
            stream.destroy();
            reject(err as Error);
          },
        );
      };
      stream.once('request', (req: ClientRequest) => {
        req.once('socket', (socket: Socket) => {
          // Up means: TCP connected and, for TLS, the handshake done (a reused socket is).
          const tls = socket instanceof TLSSocket;
          if (tls ? socket.authorized : !socket.connecting) return write();
          socket.once(tls ? 'secureConnect' : 'connect', write);
        });
      });
      stream.on('response', (res: { statusCode: number; headers: Record<string, string | string[] | undefined> }) => {
        settled = true;
        const retryAfter = res.headers['retry-after'];
        resolve({
          status: res.statusCode,
          outcome: outcomeOf(res.statusCode),
          error: null,
          retryAfterMs: parseRetryAfter(Array.isArray(retryAfter) ? retryAfter[0] : retryAfter, new Date()),
          durationMs: elapsed(),
        });
        // The answer is in; read a little of the body so the connection can be reused, then stop.
        let read = 0;
        stream.on('data', (chunk: Buffer) => {
          read += chunk.length;
          if (read > MAX_RESPONSE_BYTES) stream.destroy();
        });
      });
      stream.on('error', (err: unknown) => {
        if (settled) return; // a late error while draining the body changes nothing
        settled = true;
        resolve({ status: null, ...classifyError(err), retryAfterMs: null, durationMs: elapsed() });
      });
    });
  }

  return { send: send as Sender['send'], close: () => agent.destroy() };
}
