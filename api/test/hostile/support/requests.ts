/**
 * Whole hostile requests for one endpoint: a body (valid, mutated, junk text
 * or none), a query string (none, valid, junk) and headers (the right
 * credential, or one header replaced by junk).
 */
import fc from 'fast-check';
import { headerValue, hostileJson, junkQuery, mutatedBody, nastyString, rawJsonText } from './arbitraries.js';
import { credentialOf, pathOf, type Endpoint, type Fixture } from './endpoints.js';
import type { HostileRequest } from './http.js';

export interface FuzzCase extends HostileRequest {
  /** The credential was replaced or removed: an authenticated endpoint must not succeed. */
  credentialTampered: boolean;
}

const CONTENT_TYPES = [
  'application/json',
  'application/json; charset=utf-8',
  'application/json; charset=utf-16',
  'application/json; charset=latin1',
  'application/json; charset=nonsense',
  'application/vnd.api+json',
  'text/plain',
  'application/x-www-form-urlencoded',
  'multipart/form-data; boundary=x',
  'application/json, text/plain',
  ';;;',
];

const HEADER_NAMES = ['authorization', 'x-api-key', 'content-type', 'content-encoding', 'x-request-id', 'accept', 'accept-encoding', 'last-event-id', 'origin', 'x-forwarded-for', 'mcp-protocol-version', 'cookie', 'range', 'if-none-match'];

function bodyArb(ep: Endpoint, f: Fixture): fc.Arbitrary<{ body?: string; contentType?: string }> {
  const json = (v: unknown): { body: string } => ({ body: JSON.stringify(v) ?? 'null' });
  const none = fc.constant({});
  if (ep.method !== 'POST' && ep.method !== 'PATCH' && ep.method !== 'ALL') return none; // fetch sends no body with GET; DELETE bodies are ignored
  const valid = ep.body ? ep.body(f) : fc.constant({});
  return fc.oneof(
    { weight: 1, arbitrary: none },
    { weight: 2, arbitrary: valid.map(json) },
    { weight: 6, arbitrary: mutatedBody(valid, ep.bodyFields ?? []).map(json) },
    { weight: 2, arbitrary: rawJsonText().map((body) => ({ body })) },
    { weight: 1, arbitrary: fc.tuple(hostileJson(3), fc.constantFrom(...CONTENT_TYPES)).map(([v, contentType]) => ({ ...json(v), contentType })) },
  );
}

function queryArb(ep: Endpoint, f: Fixture): fc.Arbitrary<string> {
  const names = ep.queryNames ?? [];
  const valid = ep.query ? ep.query(f).map((q) => new URLSearchParams(q).toString()) : fc.constant('');
  return fc.oneof(
    { weight: 3, arbitrary: fc.constant('') },
    { weight: 3, arbitrary: valid },
    { weight: 3, arbitrary: junkQuery(names) },
    { weight: 1, arbitrary: fc.tuple(valid, junkQuery(names)).map(([v, j]) => [v, j].filter(Boolean).join('&')) },
  );
}

type HeaderChange = { name: string; value: string | null } | null;

const headerChangeArb: fc.Arbitrary<HeaderChange> = fc.oneof(
  { weight: 5, arbitrary: fc.constant(null) },
  { weight: 4, arbitrary: fc.record({ name: fc.constantFrom(...HEADER_NAMES), value: fc.oneof(headerValue(), fc.constant(null)) }) },
  { weight: 1, arbitrary: fc.record({ name: fc.constantFrom('x-custom', 'x-' + 'h'.repeat(200)), value: headerValue() }) },
);

export function fuzzCaseArb(ep: Endpoint, f: Fixture, ingestToken: string): fc.Arbitrary<FuzzCase> {
  const idArb = ep.route.includes(':id') ? fc.oneof(fc.constant(null), junkId()) : fc.constant(null);
  const methodArb = ep.method === 'ALL' ? fc.constantFrom('GET', 'PUT', 'PATCH', 'DELETE') : fc.constant(ep.method);
  return fc.tuple(bodyArb(ep, f), queryArb(ep, f), headerChangeArb, idArb, methodArb).map(([body, query, change, id, method]) => {
    const headers: Record<string, string> = { ...credentialOf(ep, f, ingestToken) };
    if (body.contentType) headers['content-type'] = body.contentType;
    else if (body.body !== undefined) headers['content-type'] = 'application/json';
    let credentialTampered = false;
    if (change) {
      if (change.value === null) delete headers[change.name];
      else headers[change.name] = change.value;
      // Replacing the Authorization header, or adding a second, different credential, must never pass.
      if (change.name === 'authorization') credentialTampered = ep.auth === 'account' || ep.auth === 'ingest';
      if (change.name === 'x-api-key' && change.value !== null && change.value.trim() !== '') credentialTampered = ep.auth === 'account';
    }
    const path = id === null ? pathOf(ep, f) : ep.route.replace(':id', id);
    let q = query;
    if (ep.auth === 'stream_token' && f.streamToken && !/(^|&)token=/.test(q)) q = [`token=${encodeURIComponent(f.streamToken)}`, q].filter(Boolean).join('&');
    return { method, path: q ? `${path}?${q}` : path, headers, body: method === 'GET' ? undefined : body.body, credentialTampered };
  });
}

/** A junk path segment, for routes with `:id`. */
export const junkId = (): fc.Arbitrary<string> => nastyString().map((s) => encodeURIComponent(Buffer.from(s, 'utf8').toString('utf8')));
