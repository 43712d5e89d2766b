/**
 * The table of every HTTP endpoint the API serves, with how it authenticates
 * and a generator of valid requests. The hostile tests iterate it, and
 * `routes.test.ts` fails when the app serves a route this table lacks, so a
 * new endpoint cannot ship unfuzzed.
 */
import fc from 'fast-check';
import { bearer, type TestAccount } from '../../support/accounts.js';

export type AuthKind =
  /** No credential. */
  | 'none'
  /** Session token or API key (Authorization: Bearer, or X-API-Key). */
  | 'account'
  /** The producer ingest token. */
  | 'ingest'
  /** A stream token in the `token` query parameter. */
  | 'stream_token';

/** What one account owns that endpoints refer to. */
export interface Fixture {
  account: TestAccount;
  /** A cursor of the account's own events. */
  cursor?: string;
  /** The id of a resource the account owns, for routes with `:id`. */
  id?: string;
  streamToken?: string;
}

export interface Endpoint {
  method: 'GET' | 'POST' | 'DELETE';
  /** As the router declares it, e.g. `/api/v1/webhooks/:id`. */
  route: string;
  auth: AuthKind;
  /** Valid JSON bodies; absent for endpoints that take no body. */
  body?: (f: Fixture) => fc.Arbitrary<Record<string, unknown>>;
  /** Fields the body schema knows (mutations replace these). */
  bodyFields?: string[];
  /** Query parameters the endpoint knows, with valid values. */
  query?: (f: Fixture) => fc.Arbitrary<Record<string, string>>;
  queryNames?: string[];
  /** Where the endpoint takes a cursor, for the cursor fuzz and the cross-account matrix. */
  cursorIn?: 'query' | 'body';
  /** A successful call changes the credential (API-key rotation): fuzz it with the session token. */
  changesCredential?: boolean;
  /** Holds the request open (long-poll, stream): fuzz with a short client timeout. */
  holdsOpen?: boolean;
  /** Not JSON on success (static files, redirects). */
  nonJson?: boolean;
  /** Largest body accepted (413 above it); 1 MB unless said. */
  bodyLimitBytes?: number;
  /** Fuzz cases for this endpoint (each is one HTTP request). */
  runs: number;
}

export const endpointName = (ep: Endpoint): string => `${ep.method} ${ep.route}`;

const uniqueEmail = fc.uuid().map((u) => `fz-${u}@example.com`);
const displayName = fc.string({ unit: 'grapheme', minLength: 1, maxLength: 60 }).filter((s) => s.trim().length > 0);
const password = fc.string({ unit: 'grapheme', minLength: 8, maxLength: 40 });

const ACCOUNTS: Endpoint[] = [
  {
    method: 'POST',
    route: '/api/auth/signup',
    auth: 'none',
    body: () =>
      fc.record(
        {
          email: uniqueEmail,
          name: displayName,
          password,
          phone: fc.constantFrom('+44 20 7946 0018', '555-0100', '(555) 010.0100', ''),
          plan: fc.constantFrom('free', 'pro', 'énterprise ☁', ''),
        },
        { requiredKeys: ['email', 'name', 'password'] },
      ),
    bodyFields: ['email', 'name', 'password', 'phone', 'plan'],
    runs: 150,
  },
  {
    method: 'POST',
    route: '/api/auth/login',
    auth: 'none',
    body: (f) => fc.record({ email: fc.oneof(fc.constant(f.account.email), uniqueEmail), password: fc.oneof(fc.constant(f.account.password), password) }),
    bodyFields: ['email', 'password', 'name', 'phone', 'plan'],
    runs: 100,
  },
  { method: 'GET', route: '/api/auth/me', auth: 'account', runs: 100 },
  { method: 'POST', route: '/api/auth/api-key', auth: 'account', changesCredential: true, runs: 60 },
  { method: 'DELETE', route: '/api/auth/api-key', auth: 'account', changesCredential: true, runs: 40 },
];

const OPERATIONS: Endpoint[] = [
  { method: 'GET', route: '/healthz', auth: 'none', runs: 30 },
  { method: 'GET', route: '/readyz', auth: 'none', runs: 30 },
  { method: 'GET', route: '/dashboard', auth: 'none', nonJson: true, runs: 20 },
  { method: 'GET', route: '/dashboard/', auth: 'none', nonJson: true, runs: 10 },
  { method: 'GET', route: '/dashboard/app.js', auth: 'none', nonJson: true, runs: 10 },
  { method: 'GET', route: '/dashboard/app.css', auth: 'none', nonJson: true, runs: 10 },
];

export const ENDPOINTS: Endpoint[] = [...ACCOUNTS, ...OPERATIONS];

/** The path of a request to `ep` for the fixture's account (`:id` filled in). */
export function pathOf(ep: Endpoint, f: Fixture): string {
  return ep.route.replace(':id', encodeURIComponent(f.id ?? 'none'));
}

/** The headers that authenticate `ep` as the fixture's account. */
export function credentialOf(ep: Endpoint, f: Fixture, ingestToken: string): Record<string, string> {
  switch (ep.auth) {
    case 'account':
      return bearer(ep.changesCredential || !f.account.apiKey ? f.account.token : f.account.apiKey);
    case 'ingest':
      return bearer(ingestToken);
    default:
      return {};
  }
}
