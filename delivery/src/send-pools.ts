/**
 * The sender's connections: one undici pool per (subscription, origin), idle
 * ones closed, every new connection dialling only addresses checked for the
 * send (see http-sender.ts for the rules); and the check of a name's
 * addresses before a send.
 */
import type { LookupAddress, LookupOneOptions } from 'node:dns';
import { createSecureContext, rootCertificates } from 'node:tls';
import { buildConnector, Client, Pool, type Dispatcher } from 'undici';
import { checkResolved, type Resolver, type SafetyPolicy } from '#shared/url-safety.js';
import type { SendContext } from './http-sender.js';

class BlockedAddressError extends Error {
  readonly code = 'ERR_BLOCKED_ADDRESS';
}

/** A request withdrawn while it waited for a connection: given to none. */
const WITHDRAWN = new Error('withdrawn while waiting for a connection');

/** A pool nothing was sent through for this long is closed (its connections are closed by then: keepAliveMaxTimeout). */
const IDLE_POOL_MS = 60_000;

/**
 * Set on a request's dispatch options: called when its pool hands it to a
 * connection (one already up, or one about to dial). False: the request was
 * withdrawn meanwhile and is given to no connection.
 */
export const ON_CONNECTION = Symbol('on connection');
export type HookedOptions = Dispatcher.DispatchOptions & { [ON_CONNECTION]?: () => boolean };

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

/** One subscription's connections to one origin, and when it was last used. */
export interface PoolEntry {
  pool: Pool;
  /** Requests given to the pool whose handler has not finished yet. */
  inFlight: number;
  lastUsed: number;
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address?: string | LookupAddress[], family?: number) => void;

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
export function remember<K, V>(cache: Map<K, V>, key: K, value: V): V {
  if (cache.size >= 10_000) cache.clear();
  cache.set(key, value);
  return value;
}

interface PoolOptions {
  policy: SafetyPolicy;
  resolve: Resolver;
  caPem: string | null;
  timeoutMs: number;
  socketsPerOrigin?: number;
  idlePoolMs?: number;
}

export class SenderPools {
  /**
   * The addresses each name last resolved to for a send, every one of them allowed. A new
   * connection dials these (checked again), so the connection's lookup is never the first
   * query of a name, and its queries are the sending account's.
   */
  private readonly checked = new Map<string, string[]>();
  /** One pool per (subscription, origin); idle ones closed, so memory follows the pairs in use. */
  private readonly pools = new Map<string, PoolEntry>();
  private readonly newPool: (origin: string) => Pool;
  private readonly sweeper: NodeJS.Timeout;

  constructor(private readonly opts: PoolOptions) {
    // An extra CA goes into ONE secure context shared by every connection: built per
    // connection, Node parsed the ~140 root certificates each time.
    const secureContext = opts.caPem ? createSecureContext({ ca: [...rootCertificates, opts.caPem] }) : undefined;
    const lookup = (hostname: string, options: LookupOneOptions & { all?: boolean }, callback: LookupCallback): void => this.dialLookup(hostname, options, callback);
    const connect = buildConnector({ ...(secureContext ? { secureContext } : {}), lookup, timeout: opts.timeoutMs } as buildConnector.BuildOptions);
    this.newPool = (origin: string): Pool =>
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
    const idlePoolMs = opts.idlePoolMs ?? IDLE_POOL_MS;
    this.sweeper = setInterval(() => this.closeIdle(idlePoolMs), idlePoolMs / 2);
    this.sweeper.unref();
  }

  /** Pools held now. */
  get size(): number {
    return this.pools.size;
  }

  poolFor(subscription: string, origin: string): PoolEntry {
    const key = `${subscription}\n${origin}`;
    let entry = this.pools.get(key);
    if (!entry) {
      if (this.pools.size >= 10_000) this.closeIdle(0);
      entry = { pool: this.newPool(origin), inFlight: 0, lastUsed: 0 };
      this.pools.set(key, entry);
    }
    entry.lastUsed = performance.now();
    return entry;
  }

  /** Resolves a name for `ctx.account` and checks every address; throws what the attempt fails with. */
  async checkName(name: string, ctx: SendContext): Promise<void> {
    const { subscription: _subscription, ...lookup } = ctx;
    const addresses = await this.opts.resolve(name, lookup);
    const refused = refusalOf(name, addresses, this.opts.policy);
    if (refused) throw refused;
    remember(this.checked, name, addresses);
  }

  close(): void {
    clearInterval(this.sweeper);
    for (const entry of this.pools.values()) entry.pool.destroy().catch(() => {});
    this.pools.clear();
  }

  private closeIdle(idleMs: number): void {
    const now = performance.now();
    for (const [key, entry] of this.pools) {
      if (entry.inFlight > 0 || now - entry.lastUsed < idleMs) continue;
      this.pools.delete(key);
      entry.pool.destroy().catch(() => {});
    }
  }

  private dialLookup(hostname: string, options: LookupOneOptions & { all?: boolean }, callback: LookupCallback): void {
    const known = this.checked.get(hostname);
    const addresses = known ? Promise.resolve(known) : this.opts.resolve(hostname, {});
    addresses.then(
      (list) => {
        const refused = refusalOf(hostname, list, this.opts.policy);
        if (refused) return callback(refused);
        const all: LookupAddress[] = list.map((address) => ({ address, family: address.includes(':') ? 6 : 4 })).filter((a) => !options.family || a.family === options.family);
        const first = all[0];
        if (!first) return callback(noAddress(hostname));
        if (options.all) return callback(null, all);
        callback(null, first.address, first.family);
      },
      (err: NodeJS.ErrnoException) => callback(err),
    );
  }
}
