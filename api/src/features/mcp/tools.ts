/**
 * The MCP tools. Each is a thin adapter: arguments checked against its
 * inputSchema, one call to the service the HTTP route uses, the service's
 * answer as the result. No rule of the event log or of webhooks is here.
 */
import type { ApiConfig } from '../../config.js';
import type { ApiDeps } from '../../deps.js';
import type { AuthContext } from '../../middleware/auth.js';
import { valueValidator, type Validator } from '../../validation.js';
import { profile } from '../auth/service.js';
import type { WaitInput } from '../events/schemas.js';
import { listEvents, waitForEvent } from '../events/service.js';
import { type JsonSchema, listEventsInput, listEventsOutput, noArguments, waitForEventInput, waitForEventOutput, whoamiOutput } from './schemas.js';

/** The account a `svc_` key belongs to; tools/call never runs without one. */
export type ToolCaller = AuthContext;

export interface ToolContext {
  deps: ApiDeps;
  caller: ToolCaller;
  /** Aborted when the HTTP client goes away; long waits stop then. */
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
  name: string;
  title: string;
  description: string;
  annotations: ToolAnnotations;
  inputSchema: JsonSchema;
  outputSchema: JsonSchema;
  /** Throws a validation_failed AppError listing every bad argument. */
  validate: Validator<Record<string, unknown>>;
  run(ctx: ToolContext, args: Record<string, unknown>): Promise<Record<string, unknown>>;
}

interface ToolSpec<A> {
  title: string;
  description: string;
  annotations: ToolAnnotations;
  inputSchema: JsonSchema;
  outputSchema: JsonSchema;
  run(ctx: ToolContext, args: A): Promise<object>;
}

function tool<A>(name: string, spec: ToolSpec<A>): Tool {
  return {
    name,
    ...spec,
    validate: valueValidator<Record<string, unknown>>(spec.inputSchema, 'arguments'),
    run: async (ctx, args) => (await spec.run(ctx, args as A)) as Record<string, unknown>,
  };
}

const readOnly: ToolAnnotations = { readOnlyHint: true, openWorldHint: false };

function eventTools(config: ApiConfig): Tool[] {
  return [
    tool<WaitInput>('wait_for_event', {
      title: 'Wait for the next event',
      description: [
        'Waits for the next event on the account (a call starting, ending, transcribed or completed, a human takeover, an SMS/WhatsApp message received or sent, a webhook test ping) and returns it as {event}.',
        `Blocks until a matching event arrives or timeout_ms passes (at most ${config.events.longPollMaxMs} ms); then returns {event: null, timed_out: true, cursor}: call again to keep waiting.`,
        "To miss nothing between calls, pass the previous result's cursor (event.cursor, or cursor after a time-out) as since.",
      ].join(' '),
      annotations: readOnly,
      inputSchema: waitForEventInput(config),
      outputSchema: waitForEventOutput,
      run: ({ deps, caller, signal }, args) => waitForEvent(deps, caller.accountId, args, signal),
    }),
    tool<Record<string, unknown>>('list_events', {
      title: 'List past events',
      description:
        "Lists the account's stored events, oldest first, as {events, cursor}. Pass the returned cursor back as since to read the next page; an empty page means you are up to date (keep the same cursor for later).",
      annotations: readOnly,
      inputSchema: listEventsInput,
      outputSchema: listEventsOutput,
      run: ({ deps, caller }, args) => listEvents(deps, caller.accountId, args),
    }),
  ];
}

const whoami = tool<Record<string, never>>('whoami', {
  title: 'Who am I',
  description: "Returns the account the API key belongs to: {account_id, user} with the user's profile (email, name, plan, key preview), as GET /api/auth/me shows it.",
  annotations: readOnly,
  inputSchema: noArguments,
  outputSchema: whoamiOutput,
  run: async ({ deps, caller }) => ({ account_id: caller.accountId, user: await profile(deps, caller.userId) }),
});

/** The tools of one app, in the order tools/list shows them. Built once per app (schemas depend on config). */
export function createTools(config: ApiConfig): ReadonlyMap<string, Tool> {
  return new Map([...eventTools(config), whoami].map((t) => [t.name, t]));
}
