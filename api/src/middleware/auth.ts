import type { Context } from 'koa';
import { unauthorized } from '#shared/errors/index.js';
import type { AuthContext } from '../auth-context.js';
import type { ApiDeps } from '../deps.js';
import { findUser, verifySessionToken } from '../features/auth/index.js';
import { consumeApiKeyRate, looksLikeApiKey, resolveApiKey } from '../features/keys/index.js';
import { setRateHeaders, type RateState } from '../features/limits/index.js';
import { guard, type Guard } from './route.js';

/** Stream tokens are valid only as the `token` query parameter of the stream URL (docs/spec.md 5.5). */
const STREAM_TOKEN_PREFIX = 'svcst_';
const MAX_CREDENTIAL_LENGTH = 4096;

/**
 * The one line of a credential header, '' when it is sent empty; null when absent. A header
 * sent twice is refused: Node keeps only the first `Authorization`, so the second would be
 * neither checked nor refused.
 */
function credentialHeader(ctx: Context, name: 'authorization' | 'x-api-key'): string | null {
  const raw = ctx.req.rawHeaders; // name, value, name, value…
  let value: string | null = null;
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.length !== name.length || raw[i]!.toLowerCase() !== name) continue;
    if (value !== null) throw unauthorized('Send one credential, not two');
    value = raw[i + 1]!.trim();
  }
  return value;
}

/** The token of an `Authorization: Bearer …` header; null when absent; 401 when malformed (an empty header too). */
export function bearerToken(ctx: Context): string | null {
  const header = credentialHeader(ctx, 'authorization');
  if (header === null) return null;
  const match = /^Bearer +(\S+) *$/i.exec(header);
  if (!match?.[1]) throw unauthorized('Authorization must be "Bearer <session token or API key>"');
  return match[1];
}

interface Credential {
  value: string;
  from: 'bearer' | 'x-api-key';
}

/**
 * The request's one credential. Every credential presented must be it: a header sent
 * empty, malformed or twice is a 401 even beside a valid one, and two different credentials
 * are a 401 whether or not each is valid and whichever accounts they belong to (neither is
 * looked up). The same value in both headers is one credential.
 */
function readCredential(ctx: Context): Credential {
  const bearer = bearerToken(ctx);
  const apiKey = credentialHeader(ctx, 'x-api-key');
  if (apiKey === '') throw unauthorized('X-API-Key is empty');
  if (bearer !== null && apiKey !== null && bearer !== apiKey) throw unauthorized('Send one credential, not two');
  const cred: Credential | null = bearer !== null ? { value: bearer, from: 'bearer' } : apiKey !== null ? { value: apiKey, from: 'x-api-key' } : null;
  if (!cred) throw unauthorized('Authentication required: send "Authorization: Bearer <token>" or "X-API-Key: <key>"');
  if (cred.value.length > MAX_CREDENTIAL_LENGTH) throw unauthorized();
  return cred;
}

async function sessionAuth(deps: ApiDeps, token: string): Promise<AuthContext> {
  const userId = verifySessionToken(deps.config.auth, token, deps.clock());
  if (!userId) throw unauthorized('Invalid or expired session token');
  // A token outlives nothing: the account must still exist.
  if (!(await findUser(deps, userId))) throw unauthorized('The account of this session no longer exists');
  return { accountId: userId, userId, via: 'session' };
}

/**
 * Resolves the request's credential and applies that credential's rate limit.
 * Throws 401 (with WWW-Authenticate: Bearer) for anything that is not a live
 * session token or API key, 429 over the limit, 503 when MongoDB is down.
 */
export async function authenticateRequest(deps: ApiDeps, ctx: Context): Promise<AuthContext> {
  const cred = readCredential(ctx);
  let auth: AuthContext;
  let rate: RateState;
  if (looksLikeApiKey(cred.value)) {
    const found = await resolveApiKey(deps, cred.value);
    if (!found) throw unauthorized('Invalid or revoked API key');
    auth = found;
    rate = await consumeApiKeyRate(deps, auth);
  } else if (cred.value.startsWith(STREAM_TOKEN_PREFIX)) {
    throw unauthorized('Stream tokens are only accepted as the token parameter of the stream URL');
  } else if (cred.from === 'x-api-key') {
    throw unauthorized('X-API-Key takes a platform API key (svc_…)');
  } else {
    auth = await sessionAuth(deps, cred.value);
    rate = await deps.limits.session.consume(auth.userId);
  }
  setRateHeaders(ctx, rate);
  return auth;
}

/** The guard of every account route (session token or API key): sets `ctx.state.auth`. */
export function authenticate(deps: ApiDeps): Guard {
  return guard('account', async (ctx) => {
    ctx.state.auth = await authenticateRequest(deps, ctx);
  });
}

/** The caller of a route behind `authenticate`. */
export function authOf(ctx: Context): AuthContext {
  const auth = ctx.state.auth as AuthContext | undefined;
  if (!auth) throw unauthorized();
  return auth;
}
