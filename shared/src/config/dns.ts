import { isIP } from 'node:net';
import { DEFAULT_DNS_CONFIG, type DnsConfig } from '../dns.js';
import { ConfigError, type Env, int, optionalStr } from './env.js';

/** `1.1.1.1`, `127.0.0.1:5353`, `::1`, `[::1]:5353`: what Resolver.setServers takes. */
function parseServer(entry: string): string {
  const bracketed = /^\[([^\]]+)\](?::(\d{1,5}))?$/.exec(entry);
  const [ip, port] = bracketed ? [bracketed[1]!, bracketed[2]] : isIP(entry) === 6 ? [entry, undefined] : (entry.split(':') as [string, string | undefined]);
  const family = isIP(ip);
  if (family === 0 || (port !== undefined && (!/^\d{1,5}$/.test(port) || Number(port) < 1 || Number(port) > 65535))) {
    throw new ConfigError('DNS_SERVERS', `has a bad entry "${entry}" (want ip or ip:port, [ipv6]:port)`);
  }
  if (port === undefined) return ip;
  return family === 6 ? `[${ip}]:${port}` : `${ip}:${port}`;
}

/**
 * DNS for webhook targets (both processes): DNS_SERVERS overrides the
 * system's servers (a resolver of your choice, or a test's fake DNS),
 * DNS_TIMEOUT_MS bounds one lookup, DNS_MAX_LOOKUPS_PER_ACCOUNT caps one
 * account's queries in flight, DNS_MAX_TTL_S caps how long an answer is cached.
 */
export function loadDnsConfig(env: Env): DnsConfig {
  const raw = optionalStr(env, 'DNS_SERVERS');
  const servers = raw === undefined ? null : raw.split(',').map((s) => s.trim()).filter(Boolean).map(parseServer);
  if (servers !== null && servers.length === 0) throw new ConfigError('DNS_SERVERS', 'lists no server');
  return {
    ...DEFAULT_DNS_CONFIG,
    servers,
    timeoutMs: int(env, 'DNS_TIMEOUT_MS', DEFAULT_DNS_CONFIG.timeoutMs, 100, 60_000),
    maxLookupsPerAccount: int(env, 'DNS_MAX_LOOKUPS_PER_ACCOUNT', DEFAULT_DNS_CONFIG.maxLookupsPerAccount, 1, 10_000),
    maxTtlS: int(env, 'DNS_MAX_TTL_S', DEFAULT_DNS_CONFIG.maxTtlS, 0, 86_400),
  };
}
