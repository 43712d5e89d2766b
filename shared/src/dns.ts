/**
 * DNS for webhook targets (the URL check at create time and every delivery
 * connection), on c-ares through `dns.promises.Resolver`, never `dns.lookup`.
 *
 * Why: `dns.lookup` runs getaddrinfo on libuv's threadpool (4 threads), the
 * pool scrypt uses for logins. A DNS server that answers in 30 s, or never,
 * holds one thread per lookup for as long as it likes, so four such names
 * stall every login and every other tenant's deliveries. A c-ares query is a
 * socket on the event loop: it waits without holding a thread, it has a real
 * per-query timeout, and `resolver.cancel()` ends it.
 *
 * On top: a small cache honouring the answers' TTLs (capped) and caching
 * "no such name" for a short while; one query per name at a time (callers of
 * a name already being looked up wait for that query); and a cap on the
 * queries one account may have in flight, so one tenant's hostile names
 * cannot queue up without bound.
 *
 * /etc/hosts is not consulted (c-ares' resolve4/resolve6 ask DNS only).
 * `localhost` and `*.localhost` answer loopback without a query (RFC 6761);
 * the URL rules refuse those names anyway unless the development setting
 * WEBHOOK_ALLOW_PRIVATE_TARGETS is on.
 */
import { promises as dnsPromises, type RecordWithTtl } from 'node:dns';
import { isIP } from 'node:net';
import type { LookupContext, Resolver } from './url-safety.js';

export interface DnsConfig {
  /** DNS servers (`ip` or `ip:port`, `[ipv6]:port`); null: the system's (/etc/resolv.conf). */
  servers: string[] | null;
  /** Most one lookup (A and AAAA, every try) may take before it fails with ETIMEOUT. */
  timeoutMs: number;
  /** Tries per server within that time. */
  tries: number;
  /** Names kept in the cache (least recently used dropped first); 0: no cache. */
  cacheSize: number;
  /** Longest time an answer is kept, whatever its TTL says. */
  maxTtlS: number;
  /** How long "no such name" is kept. */
  negativeTtlS: number;
  /** Queries one account may have in flight in this process. */
  maxLookupsPerAccount: number;
}

export const DEFAULT_DNS_CONFIG: DnsConfig = {
  servers: null,
  timeoutMs: 5000,
  tries: 2,
  cacheSize: 10_000,
  maxTtlS: 300,
  negativeTtlS: 30,
  maxLookupsPerAccount: 8,
};

/** A failure kept in the cache for this long at most (timeouts, SERVFAIL): retried soon. */
const TRANSIENT_TTL_S = 5;

const NO_DATA = new Set(['ENODATA', 'ENOTFOUND', 'ENONAME', 'EBADNAME']);

class DnsError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'DnsError';
  }
}

/** Thrown when an account already has its cap of queries in flight. */
export const LOOKUP_LIMIT = 'ELOOKUPLIMIT';

type Entry = { expires: number; addresses: string[] } | { expires: number; error: DnsError };

export class DnsResolver {
  private readonly cache = new Map<string, Entry>();
  private readonly inFlight = new Map<string, Promise<Entry>>();
  private readonly perAccount = new Map<string, number>();
  private readonly running = new Set<dnsPromises.Resolver>();
  private closed = false;

  constructor(
    private readonly config: DnsConfig,
    private readonly now: () => number = Date.now,
  ) {}

  /** The function the URL checks and the sender take. */
  readonly resolve: Resolver = (hostname, ctx) => this.lookup(hostname, ctx);

  /** Every address of the name (IPv4 then IPv6); throws DnsError (ENOTFOUND, ETIMEOUT, ELOOKUPLIMIT, …). */
  async lookup(hostname: string, ctx: LookupContext = {}): Promise<string[]> {
    if (this.closed) throw new DnsError('ECANCELLED', `lookup of ${hostname} cancelled: resolver closed`);
    const name = hostname.toLowerCase().replace(/\.+$/, '');
    if (isIP(name)) return [name];
    if (name === 'localhost' || name.endsWith('.localhost')) return ['127.0.0.1', '::1'];
    const cached = this.cache.get(name);
    if (cached && cached.expires > this.now()) {
      this.cache.delete(name); // re-insert: most recently used last
      this.cache.set(name, cached);
      return settle(cached);
    }
    let pending = this.inFlight.get(name);
    if (!pending) {
      const account = ctx.account;
      if (account !== undefined) {
        const busy = this.perAccount.get(account) ?? 0;
        if (busy >= this.config.maxLookupsPerAccount) {
          throw new DnsError(LOOKUP_LIMIT, `too many DNS lookups in flight for this account (at most ${this.config.maxLookupsPerAccount})`);
        }
        this.perAccount.set(account, busy + 1);
      }
      pending = this.query(name).finally(() => {
        this.inFlight.delete(name);
        if (account !== undefined) {
          const left = (this.perAccount.get(account) ?? 1) - 1;
          if (left <= 0) this.perAccount.delete(account);
          else this.perAccount.set(account, left);
        }
      });
      this.inFlight.set(name, pending);
    }
    return settle(await abortable(pending, ctx.signal, hostname));
  }

  /** Queries in flight in this process (for tests and metrics). */
  get pending(): number {
    return this.inFlight.size;
  }

  /** Cancels every query in flight (their callers get ECANCELLED) and refuses new ones. */
  close(): void {
    this.closed = true;
    for (const r of this.running) r.cancel();
  }

  private async query(name: string): Promise<Entry> {
    const { config } = this;
    const resolver = new dnsPromises.Resolver({ timeout: Math.max(50, Math.floor(config.timeoutMs / config.tries)), tries: config.tries });
    if (config.servers) resolver.setServers(config.servers);
    this.running.add(resolver);
    let timedOut = false;
    // c-ares doubles the timeout on each try; this bounds the whole lookup.
    const timer = setTimeout(() => {
      timedOut = true;
      resolver.cancel();
    }, config.timeoutMs);
    try {
      const [v4, v6] = await Promise.allSettled([resolver.resolve4(name, { ttl: true }), resolver.resolve6(name, { ttl: true })]);
      const entry = this.entryOf(name, [v4, v6], timedOut);
      this.remember(name, entry);
      return entry;
    } finally {
      clearTimeout(timer);
      this.running.delete(resolver);
    }
  }

  private entryOf(name: string, results: PromiseSettledResult<RecordWithTtl[]>[], timedOut: boolean): Entry {
    const now = this.now();
    const records = results.flatMap((r) => (r.status === 'fulfilled' ? r.value : []));
    const failures = results.flatMap((r) => (r.status === 'rejected' ? [errorCode(r.reason)] : []));
    const transient = failures.find((code) => !NO_DATA.has(code));
    if (records.length > 0) {
      let ttl = Math.min(this.config.maxTtlS, ...records.map((r) => r.ttl));
      // One family failed for now: use what we have, ask again soon.
      if (transient) ttl = Math.min(ttl, TRANSIENT_TTL_S);
      return { expires: now + ttl * 1000, addresses: [...new Set(records.map((r) => r.address))] };
    }
    if (transient) {
      const code = timedOut || transient === 'ECANCELLED' ? (this.closed ? 'ECANCELLED' : 'ETIMEOUT') : transient;
      const why = code === 'ETIMEOUT' ? 'no answer in time' : code;
      return { expires: now + Math.min(TRANSIENT_TTL_S, this.config.negativeTtlS) * 1000, error: new DnsError(code, `DNS lookup of ${name} failed: ${why}`) };
    }
    return { expires: now + this.config.negativeTtlS * 1000, error: new DnsError('ENOTFOUND', `DNS lookup of ${name} failed: no such name`) };
  }

  private remember(name: string, entry: Entry): void {
    if (this.config.cacheSize === 0 || entry.expires <= this.now() || this.closed) return;
    this.cache.delete(name);
    this.cache.set(name, entry);
    while (this.cache.size > this.config.cacheSize) {
      const oldest = this.cache.keys().next().value as string;
      this.cache.delete(oldest);
    }
  }
}

function errorCode(err: unknown): string {
  return (err as { code?: string }).code ?? 'EUNKNOWN';
}

function settle(entry: Entry): string[] {
  if ('error' in entry) throw entry.error;
  return entry.addresses;
}

/** The caller stops waiting when its signal fires; the shared query goes on (bounded by its timeout). */
function abortable<T>(work: Promise<T>, signal: AbortSignal | undefined, hostname: string): Promise<T> {
  if (!signal) return work;
  const cancelled = (): DnsError => new DnsError('ECANCELLED', `lookup of ${hostname} cancelled`);
  if (signal.aborted) return Promise.reject(cancelled());
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(cancelled());
    signal.addEventListener('abort', onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort));
  });
}
