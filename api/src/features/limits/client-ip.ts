import { isIPv4, isIPv6 } from 'node:net';

/** Expands an IPv6 address to its eight hextets (no zone, no embedded IPv4 tail). */
function hextets(ip: string): string[] | null {
  const [head, tail, extra] = ip.split('::');
  if (extra !== undefined) return null;
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const missing = tail === undefined ? 0 : 8 - left.length - right.length;
  if (missing < 0) return null;
  const all = [...left, ...Array<string>(missing).fill('0'), ...right];
  return all.length === 8 ? all.map((h) => h.toLowerCase().padStart(4, '0')) : null;
}

/**
 * The subject a per-IP limit counts against. IPv4 (also when IPv4-mapped) is
 * the address itself; IPv6 is its /64, because one host usually holds a whole
 * /64 and could otherwise step around the limit by changing addresses.
 */
export function ipRateSubject(rawIp: string): string {
  const ip = rawIp.trim().replace(/^\[|\]$/g, '').replace(/%.*$/, '');
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i.exec(ip);
  if (mapped?.[1] && isIPv4(mapped[1])) return mapped[1];
  if (isIPv4(ip)) return ip;
  if (isIPv6(ip) && !ip.includes('.')) {
    const parts = hextets(ip);
    if (parts) return `${parts.slice(0, 4).join(':')}::/64`;
  }
  // Not an address (an odd proxy header): count it as given, bounded in size.
  return ip.slice(0, 64) || 'unknown';
}
