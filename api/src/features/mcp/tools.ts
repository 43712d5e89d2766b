/**
 * The MCP tools. Each is a thin adapter: validated arguments in, one service
 * call (the same one the HTTP route makes), a JSON object out. No rule of the
 * event log or of webhooks is written here.
 */
import type { ApiDeps } from '../../deps.js';
import type { AuthContext } from '../../middleware/auth.js';
import { profile } from '../auth/service.js';
import { valueValidator, type Validator } from '../../validation.js';
import { inputSchemas, outputSchemas, type ToolName } from './schemas.js';

/** The account a `svc_` key belongs to; tools/call never runs without one. */
export type ToolCaller = AuthContext;

export interface ToolContext {
  deps: ApiDeps;
  caller: ToolCaller;
  /** Aborted when the HTTP client goes away; long waits must stop then. */
  signal: AbortSignal;
}

/** Hints for clients deciding what to confirm with a human (MCP ToolAnnotations). */
interface ToolAnnotations {
  readOnlyHint?: boolean;
  destructiveHint?: boolean;
  idempotentHint?: boolean;
  openWorldHint?: boolean;
}

export interface Tool {
  name: ToolName;
  title: string;
  description: string;
  annotations: ToolAnnotations;
  inputSchema: Record<string, unknown>;
  outputSchema: Record<string, unknown>;
  /** Throws a validation_failed AppError listing every bad argument. */
  validate: Validator<Record<string, unknown>>;
  run(ctx: ToolContext, args: Record<string, unknown>): Promise<Record<string, unknown>>;
}

type ToolSpec<A> = Pick<Tool, 'title' | 'description' | 'annotations'> & {
  run(ctx: ToolContext, args: A): Promise<Record<string, unknown>>;
};

function tool<A>(name: ToolName, spec: ToolSpec<A>): Tool {
  const inputSchema = inputSchemas[name];
  return {
    name,
    ...spec,
    inputSchema,
    outputSchema: outputSchemas[name],
    validate: valueValidator<Record<string, unknown>>(inputSchema, 'arguments'),
    run: (ctx, args) => spec.run(ctx, args as A),
  };
}

const readOnly: ToolAnnotations = { readOnlyHint: true, openWorldHint: false };

const TOOL_LIST: Tool[] = [
  tool<Record<string, never>>('whoami', {
    title: 'Who am I',
    description: "Returns the account the API key belongs to: its id and the user's profile (email, name, plan, key preview), as GET /api/auth/me shows it.",
    annotations: readOnly,
    run: async ({ deps, caller }) => ({ account_id: caller.accountId, user: await profile(deps, caller.userId) }),
  }),
];

export const TOOLS: ReadonlyMap<string, Tool> = new Map(TOOL_LIST.map((t) => [t.name, t]));
