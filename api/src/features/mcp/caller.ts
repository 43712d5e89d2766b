import type { Context } from 'koa';
import { unauthorized } from '#shared/errors/index.js';
import type { ApiDeps } from '../../deps.js';
import { authenticateRequest, bearerToken } from '../../middleware/auth.js';
import { consumeApiKeyRate, looksLikeApiKey } from '../keys/index.js';
import { setRateHeaders } from '../limits/index.js';
import type { ToolCaller } from './tools.js';

/**
 * The account behind the tool calls of one POST. Only a platform API key
 * (`Authorization: Bearer svc_…`, or `X-API-Key`) is accepted: docs/spec.md 5.6.
 * The key is resolved and rate-limited by the same code as every other API
 * request; each tools/call of a batch counts as one request against the
 * key's 100 per minute. Throws 401 / 429 / 503 as AppErrors.
 */
export async function resolveToolCaller(deps: ApiDeps, ctx: Context, toolCalls: number): Promise<ToolCaller> {
  const credential = bearerToken(ctx) ?? ctx.get('X-API-Key').trim();
  if (!credential) throw unauthorized('tools/call requires the account API key: "Authorization: Bearer svc_…"');
  if (!looksLikeApiKey(credential)) throw unauthorized('tools/call takes a platform API key (svc_…), not a session token');
  const auth = await authenticateRequest(deps, ctx);
  for (let i = 1; i < toolCalls; i++) setRateHeaders(ctx, await consumeApiKeyRate(deps, auth));
  return auth;
}
