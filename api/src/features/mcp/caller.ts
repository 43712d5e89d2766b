import type { Context } from 'koa';
import { unauthorized } from '../../../../shared/src/errors/index.js';
import type { ApiDeps } from '../../deps.js';
import type { ToolCaller } from './tools.js';

/**
 * The account behind a tools/call. Placeholder until the accounts feature
 * (API keys, shared rate limits) is merged: refuses every caller.
 */
export async function resolveToolCaller(_deps: ApiDeps, _ctx: Context, _toolCalls: number): Promise<ToolCaller> {
  throw unauthorized('tools/call requires the account API key: "Authorization: Bearer svc_…"');
}
