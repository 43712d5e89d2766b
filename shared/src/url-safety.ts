/**
 * Where a webhook may be sent. The same rules run when a subscription is
 * created (literal host or every address its name resolves to) and again
 * right before each delivery connects (the addresses actually dialled), so a
 * name that is re-pointed at an inside address later (DNS rebinding) is
 * still refused.
 *
 * The check is an allowlist: an IPv4 address must be ordinary unicast and an
 * IPv6 address global unicast (2000::/3) outside every special range.
 * Tunnelled/translated IPv6 forms (IPv4-mapped, IPv4-compatible, 6to4, NAT64)
 * are judged by the IPv4 address they carry.
 *
 * Messages say which rule a URL broke, never which address a name resolved
 * to: the API is not an oracle for what names mean inside our network.
 */
import ipaddr from 'ipaddr.js';

/** Who asks (the per-account cap on lookups in flight) and when to stop waiting. */
export interface LookupContext {
  account?: string;
  signal?: AbortSignal;
}

/** Resolves a host name to every address it has (shared/src/dns.ts; tests inject a fake). */
export type Resolver = (hostname: string, ctx?: LookupContext) => Promise<string[]>;

export type BlockReason =
  | 'invalid_url'
  | 'scheme'
  | 'credentials'
  | 'port'
  | 'local_name'
  | 'unresolvable'
  | 'loopback'
  | 'private'
  | 'link_local'
  | 'cgnat'
  | 'multicast'
  | 'unspecified'
  | 'broadcast'
  | 'documentation'
  | 'reserved';

export interface SafetyPolicy {
  /**
   * Development only: lets loopback, RFC 1918 / fc00::/7 addresses and local
   * names through (a receiver on the developer's machine or compose network).
   * Link-local (cloud metadata), multicast, reserved and the rest stay blocked.
   */
  allowPrivate: boolean;
  /**
   * Ports allowed besides 443 and 8443 (inclusive ranges; WEBHOOK_ALLOWED_PORTS).
   * The development setting allowPrivate admits any port (local receivers listen
   * where they can).
   */
  allowedPorts?: readonly (readonly [number, number])[];
}

/** Ports every policy allows: HTTPS and its common alternative. */
const DEFAULT_PORTS: readonly number[] = [443, 8443];

export type Verdict = { ok: true } | { ok: false; reason: BlockReason; message: string };

const DESCRIBE: Record<BlockReason, string> = {
  invalid_url: 'not a valid URL',
  scheme: 'not https',
  credentials: 'contains credentials',
  port: 'not an allowed port',
  local_name: 'a local or internal name',
  unresolvable: 'does not resolve',
  loopback: 'a loopback address',
  private: 'a private address',
  link_local: 'a link-local address',
  cgnat: 'a carrier-grade NAT address',
  multicast: 'a multicast address',
  unspecified: 'an unspecified address',
  broadcast: 'a broadcast address',
  documentation: 'a documentation address',
  reserved: 'a reserved or special-purpose address',
};

/** Reasons the development setting waives. */
const PRIVATE_REASONS = new Set<BlockReason>(['loopback', 'private', 'local_name']);

const DOCUMENTATION_V4 = ['192.0.2.0/24', '198.51.100.0/24', '203.0.113.0/24'].map((c) => ipaddr.IPv4.parseCIDR(c));
const DOCUMENTATION_V6 = ipaddr.IPv6.parseCIDR('2001:db8::/32');
const GLOBAL_UNICAST_V6 = ipaddr.IPv6.parseCIDR('2000::/3');
const IPV4_COMPATIBLE_V6 = ipaddr.IPv6.parseCIDR('::/96');

/** Suffixes that only mean something inside a network (RFC 6761, 6762, 8375 and common practice). */
const LOCAL_SUFFIXES = ['localhost', 'local', 'internal', 'localdomain', 'lan', 'home.arpa', 'arpa', 'intranet', 'corp', 'home'];

function classifyV4(addr: ipaddr.IPv4): BlockReason | null {
  const range = addr.range();
  switch (range) {
    case 'unicast':
      return null;
    case 'loopback':
      return 'loopback';
    case 'private':
      return 'private';
    case 'linkLocal':
      return 'link_local';
    case 'carrierGradeNat':
      return 'cgnat';
    case 'multicast':
      return 'multicast';
    case 'unspecified':
      return 'unspecified';
    case 'broadcast':
      return 'broadcast';
    default:
      return DOCUMENTATION_V4.some((cidr) => addr.match(cidr)) ? 'documentation' : 'reserved';
  }
}

function embeddedV4(addr: ipaddr.IPv6, fromPart: number): ipaddr.IPv4 {
  const p = addr.parts;
  const hi = p[fromPart] ?? 0;
  const lo = p[fromPart + 1] ?? 0;
  return new ipaddr.IPv4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff]);
}

function classifyV6(addr: ipaddr.IPv6): BlockReason | null {
  const range = addr.range();
  switch (range) {
    case 'ipv4Mapped':
    case 'rfc6145':
      return classifyV4(embeddedV4(addr, 6));
    case 'rfc6052':
      // 64:ff9b::/96 carries a public IPv4 address; the local-use 64:ff9b:1::/48 is a private network.
      return addr.parts[2] === 0 ? classifyV4(embeddedV4(addr, 6)) : 'private';
    case '6to4':
      return classifyV4(embeddedV4(addr, 1));
    case 'loopback':
      return 'loopback';
    case 'uniqueLocal':
      return 'private';
    case 'linkLocal':
      return 'link_local';
    case 'multicast':
      return 'multicast';
    case 'unspecified':
      return 'unspecified';
    case 'unicast':
      if (addr.match(IPV4_COMPATIBLE_V6)) return classifyV4(embeddedV4(addr, 6));
      return addr.match(GLOBAL_UNICAST_V6) ? null : 'reserved';
    default:
      // Teredo, discard, benchmarking, ORCHID, AS112 and friends.
      return addr.match(DOCUMENTATION_V6) ? 'documentation' : 'reserved';
  }
}

/** Classifies one IP address; null when it is a public unicast address. */
export function classifyAddress(ip: string): BlockReason | null {
  const text = ip.startsWith('[') && ip.endsWith(']') ? ip.slice(1, -1) : ip;
  if (ipaddr.IPv4.isValidFourPartDecimal(text)) return classifyV4(ipaddr.IPv4.parse(text));
  if (ipaddr.IPv6.isValid(text)) return classifyV6(ipaddr.IPv6.parse(text));
  // Not a canonical address (resolvers and the URL parser only give canonical ones).
  return 'reserved';
}

/** Names the setting that waives a refusal, for the reasons it waives (a developer's local receiver hits them first). */
const hintFor = (reason: BlockReason): string => (PRIVATE_REASONS.has(reason) ? '; WEBHOOK_ALLOW_PRIVATE_TARGETS=true allows loopback and private targets in development' : '');

function verdict(reason: BlockReason | null, policy: SafetyPolicy, subject: string): Verdict {
  if (reason === null || (policy.allowPrivate && PRIVATE_REASONS.has(reason))) return { ok: true };
  return { ok: false, reason, message: `${subject} is ${DESCRIBE[reason]}${hintFor(reason)}` };
}

/** Checks a literal address (from the URL itself, so the message may name it). */
export function checkAddress(ip: string, policy: SafetyPolicy): Verdict {
  return verdict(classifyAddress(ip), policy, `address ${ip}`);
}

/**
 * Checks an address a name resolved to. The message names the rule only:
 * which inside address a name points at is not the caller's business.
 */
export function checkResolved(name: string, ip: string, policy: SafetyPolicy): Verdict {
  const v = verdict(classifyAddress(ip), policy, '');
  return v.ok ? v : { ok: false, reason: v.reason, message: `url host ${name} resolves to a private or internal address${hintFor(v.reason)}` };
}

/** Anything in a text that looks like an IPv4 or IPv6 address (checked with the real parser below). */
const ADDRESS_LIKE = /\[?[0-9a-f]*:[0-9a-f:.]*[0-9a-f]\]?|\b\d{1,3}(?:\.\d{1,3}){3}\b/gi;

/** Replaces every non-public address in a text (an error we store or show) with "<internal address>". */
export function redactAddresses(text: string): string {
  return text.replace(ADDRESS_LIKE, (found) => {
    const ip = found.replace(/^\[|\]$/g, '');
    const valid = ipaddr.IPv4.isValidFourPartDecimal(ip) || (ip.includes(':') && ipaddr.IPv6.isValid(ip));
    return valid && classifyAddress(ip) !== null ? '<internal address>' : found;
  });
}

type HostKind = { kind: 'ip'; address: string } | { kind: 'name'; name: string } | { kind: 'invalid' };

/**
 * The URL parser already turns 2130706433, 0x7f000001, 0177.0.0.1 and 127.1
 * into 127.0.0.1, and drops one trailing dot of an address; every trailing dot
 * is stripped here (`localhost..`, `127.0.0.1..` are the same hosts) and the
 * rest parsed again, so no spelling gets past the rules as an unknown name.
 */
function hostKind(hostname: string): HostKind {
  if (hostname.startsWith('[')) return { kind: 'ip', address: hostname.slice(1, -1) };
  const stripped = hostname.toLowerCase().replace(/\.+$/, '');
  if (stripped === '') return { kind: 'invalid' };
  let host = stripped;
  if (stripped !== hostname.toLowerCase()) {
    try {
      host = new URL(`https://${stripped}/`).hostname;
    } catch {
      return { kind: 'invalid' };
    }
    if (host.startsWith('[')) return { kind: 'ip', address: host.slice(1, -1) };
  }
  if (ipaddr.IPv4.isValidFourPartDecimal(host)) return { kind: 'ip', address: host };
  return { kind: 'name', name: host };
}

function portAllowed(port: number, policy: SafetyPolicy): boolean {
  if (policy.allowPrivate || DEFAULT_PORTS.includes(port)) return true;
  return (policy.allowedPorts ?? []).some(([lo, hi]) => port >= lo && port <= hi);
}

/** The URL's port (443 when it has none) must be 443, 8443 or a configured one. */
function checkPort(url: URL, policy: SafetyPolicy): Verdict {
  const port = url.port === '' ? 443 : Number(url.port);
  if (portAllowed(port, policy)) return { ok: true };
  return { ok: false, reason: 'port', message: `url port ${port} is not allowed (443, 8443 or one in WEBHOOK_ALLOWED_PORTS)` };
}

/** Every check that needs no DNS: scheme, credentials, port, literal address or name rules. */
export function precheckUrl(raw: string, policy: SafetyPolicy): { url: URL; host: HostKind & { kind: 'name' | 'ip' } } | { verdict: Verdict & { ok: false } } {
  const parsed = parseWebhookUrl(raw);
  if ('verdict' in parsed) return parsed;
  const host = hostKind(parsed.url.hostname);
  if (host.kind === 'invalid') return { verdict: { ok: false, reason: 'invalid_url', message: 'url has no valid host' } };
  const v = host.kind === 'ip' ? verdict(classifyAddress(host.address), policy, `url host ${host.address}`) : checkHostName(host.name, policy);
  if (!v.ok) return { verdict: v };
  const port = checkPort(parsed.url, policy);
  if (!port.ok) return { verdict: port };
  return { url: parsed.url, host };
}

function isLocalName(name: string): boolean {
  if (!name.includes('.')) return true; // single label: resolved through search domains, i.e. inside
  return LOCAL_SUFFIXES.some((suffix) => name === suffix || name.endsWith(`.${suffix}`));
}

/** Name rules only (no resolution): local and single-label names are inside names. */
function checkHostName(name: string, policy: SafetyPolicy): Verdict {
  return verdict(isLocalName(name) ? 'local_name' : null, policy, `url host ${name}`);
}

/** Static checks on a URL string: parse, scheme, credentials. Returns the parsed URL or a verdict. */
export function parseWebhookUrl(raw: string): { url: URL } | { verdict: Verdict & { ok: false } } {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { verdict: { ok: false, reason: 'invalid_url', message: 'url is not a valid URL' } };
  }
  if (url.protocol !== 'https:') return { verdict: { ok: false, reason: 'scheme', message: 'url must use https' } };
  if (url.username !== '' || url.password !== '' || /^https:\/\/[^/?#]*@/i.test(raw.trim())) {
    return { verdict: { ok: false, reason: 'credentials', message: 'url must not contain credentials' } };
  }
  if (url.hostname === '') return { verdict: { ok: false, reason: 'invalid_url', message: 'url has no host' } };
  return { url };
}

/**
 * The full check at subscription time: static rules, then the literal
 * address or every address the name resolves to.
 */
export async function checkWebhookUrl(raw: string, policy: SafetyPolicy, resolve: Resolver, ctx: LookupContext = {}): Promise<Verdict> {
  const checked = precheckUrl(raw, policy);
  if ('verdict' in checked) return checked.verdict;
  const { host } = checked;
  if (host.kind === 'ip') return { ok: true };
  let addresses: string[];
  try {
    addresses = await resolve(host.name, ctx);
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code && !['ENOTFOUND', 'ENODATA', 'ENONAME', 'EAI_NONAME', 'EAI_NODATA'].includes(code)) throw err;
    addresses = [];
  }
  if (addresses.length === 0) return { ok: false, reason: 'unresolvable', message: `url host ${host.name} does not resolve` };
  for (const address of addresses) {
    const v = checkResolved(host.name, address, policy);
    if (!v.ok) return v;
  }
  return { ok: true };
}
