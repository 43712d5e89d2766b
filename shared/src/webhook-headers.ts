/**
 * Custom headers of a subscription: sent on every attempt, stored sealed
 * like the signing secret (SecretBox, bound to `${id}:headers` so they
 * cannot be swapped with a secret or another subscription's headers), shown
 * masked. The API checks them here; the delivery process opens them right
 * before each send.
 */

/** At most this many headers per subscription. */
export const MAX_HEADERS = 20;
/** Longest value, in characters. */
export const MAX_HEADER_VALUE = 1024;
/** Names and values together, in bytes (the request's other headers take well under 1 KiB). */
export const MAX_HEADERS_BYTES = 4096;
/** What every answer shows in place of a value. */
export const MASK = '****' as const;

/** The associated data a subscription's headers are sealed under. */
export function headersAad(subscriptionId: string): string {
  return `${subscriptionId}:headers`;
}

/** An HTTP field name (RFC 9110 token), at most 64 characters. */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$/;
/** Visible ASCII, spaces and tabs inside; no control characters (CR and LF included). */
const VALUE = /^[\x21-\x7e]([\x20-\x7e\t]*[\x21-\x7e])?$/;

/** Set by the service on every attempt (signature, ids, the body's framing): never overridden. */
const SERVICE_SET = new Set(['webhook-id', 'webhook-timestamp', 'webhook-signature', 'content-type', 'content-length', 'user-agent', 'host']);
/** Hop-by-hop: about one connection, not the request (RFC 9110 7.6.1), and what proxies act on. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'te', 'trailer', 'upgrade']);

/** Why `name` may not be set, or null when it may. */
function refusal(name: string): string | null {
  const lower = name.toLowerCase();
  if (lower.startsWith('x-service-')) return `${name} is set by the service (X-Service-*)`;
  if (SERVICE_SET.has(lower)) return `${name} is set by the service`;
  if (HOP_BY_HOP.has(lower) || lower.startsWith('proxy-')) return `${name} is a hop-by-hop header`;
  return null;
}

/** Whether `name` is a header a subscription may set (the delivery process sends no other, whatever is stored). */
export function maySet(name: string): boolean {
  return TOKEN.test(name) && refusal(name) === null;
}

/** One problem with a headers object: the path names the header. */
interface HeaderProblem {
  path: string;
  message: string;
}

/** Every problem with `headers` (empty: they may be stored); the first one names the header in the answer's message. */
export function checkHeaders(headers: Record<string, string>): HeaderProblem[] {
  const problems: HeaderProblem[] = [];
  const names = Object.keys(headers);
  if (names.length > MAX_HEADERS) problems.push({ path: 'headers', message: `at most ${MAX_HEADERS} headers` });
  const seen = new Map<string, string>();
  let bytes = 0;
  for (const name of names) {
    const value = headers[name] as string;
    const path = `headers.${name}`;
    bytes += Buffer.byteLength(name) + Buffer.byteLength(value);
    if (!TOKEN.test(name)) {
      problems.push({ path, message: `"${name.slice(0, 64)}" is not a valid header name (letters, digits and !#$%&'*+.^_\`|~- only, 1 to 64 characters)` });
      continue;
    }
    const refused = refusal(name);
    if (refused) problems.push({ path, message: `${refused} and cannot be set` });
    const lower = name.toLowerCase();
    const other = seen.get(lower);
    if (other !== undefined) problems.push({ path, message: `${name} is given twice (as ${other} too; names are case-insensitive)` });
    seen.set(lower, name);
    if (value.length > MAX_HEADER_VALUE) problems.push({ path, message: `the value of ${name} is longer than ${MAX_HEADER_VALUE} characters` });
    else if (!VALUE.test(value)) problems.push({ path, message: `the value of ${name} may hold only visible ASCII, spaces and tabs (no line breaks or control characters, none at either end)` });
  }
  if (bytes > MAX_HEADERS_BYTES) problems.push({ path: 'headers', message: `names and values together take more than ${MAX_HEADERS_BYTES} bytes` });
  return problems;
}

/** The masked form every answer shows: each name with `****`. */
export function maskHeaders(names: readonly string[] | undefined): Record<string, typeof MASK> {
  return Object.fromEntries((names ?? []).map((n) => [n, MASK]));
}
