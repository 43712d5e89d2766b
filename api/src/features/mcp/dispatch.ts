/**
 * MCP methods: what each JSON-RPC request asks and what we answer. The
 * transport (HTTP status codes, headers, auth, batches) is in routes.ts.
 */
import { AppError, validationFailed } from '../../../../shared/src/errors/index.js';
import { isDependencyError } from '../../../../shared/src/errors/dependency.js';
import type { ApiDeps } from '../../deps.js';
import { nestedDeeperThan } from '../../validation.js';
import {
  invalidParams,
  negotiateVersion,
  paramsObject,
  type ProtocolVersion,
  resultResponse,
  errorResponse,
  RPC,
  RpcError,
  type Response,
  versionAtLeast,
} from './protocol.js';
import { serverVersion } from './server-info.js';
import type { Tool, ToolCaller } from './tools.js';

/** No tool takes arguments nested anywhere near this deep. */
const MAX_ARGUMENT_DEPTH = 32;

export interface DispatchContext {
  deps: ApiDeps;
  tools: ReadonlyMap<string, Tool>;
  /** From MCP-Protocol-Version (or the version assumed without it). */
  version: ProtocolVersion;
  /** Resolved from the `svc_` key before any tools/call runs; null when none was needed. */
  caller: ToolCaller | null;
  signal: AbortSignal;
  requestId: string;
}

export const INSTRUCTIONS = [
  "This server gives an AI agent the event log of one account on a voice and messaging platform: calls starting and ending, transcripts and post-call insights, human takeovers, SMS/WhatsApp messages received and sent, and webhook test pings.",
  'To react to events, call wait_for_event in a loop. It waits up to 55 s and returns one event, or {event: null, timed_out: true}. Pass the `cursor` of the last event you handled as `since`, so nothing is missed or seen twice between calls.',
  'list_events reads past events page by page (pass the returned `cursor` back as `since`). The webhook tools manage HTTPS push subscriptions. whoami tells which account the key belongs to.',
  'tools/call needs the account API key: `Authorization: Bearer svc_...`.',
].join('\n');

export async function dispatch(dc: DispatchContext, method: string, id: string | number, params: unknown): Promise<Response> {
  try {
    return resultResponse(id, await handle(dc, method, params));
  } catch (err) {
    if (err instanceof RpcError) return errorResponse(id, err.toJSON());
    dc.deps.log.error({ err, request_id: dc.requestId, method }, 'mcp request failed');
    return errorResponse(id, { code: RPC.INTERNAL_ERROR, message: 'Internal error' });
  }
}

async function handle(dc: DispatchContext, method: string, params: unknown): Promise<Record<string, unknown>> {
  switch (method) {
    case 'initialize':
      return initialize(params);
    case 'ping':
      paramsObject(params);
      return {};
    case 'tools/list':
      paramsObject(params);
      return { tools: [...dc.tools.values()].map((t) => describeTool(t, dc.version)) };
    case 'tools/call':
      return callTool(dc, params);
    default:
      throw new RpcError(RPC.METHOD_NOT_FOUND, `Method not found: ${method}`);
  }
}

function initialize(params: unknown): Record<string, unknown> {
  const p = paramsObject(params);
  if (typeof p.protocolVersion !== 'string') throw invalidParams('params.protocolVersion must be a string');
  const version = negotiateVersion(p.protocolVersion);
  const serverInfo: Record<string, unknown> = { name: 'event-platform', version: serverVersion() };
  if (versionAtLeast(version, '2025-06-18')) serverInfo.title = 'Event platform';
  return {
    protocolVersion: version,
    // Stateless: the tool list never changes while the server runs, and no server-to-client messages exist.
    capabilities: { tools: { listChanged: false } },
    serverInfo,
    instructions: INSTRUCTIONS,
  };
}

/** `title` and `outputSchema` arrived in 2025-06-18; older clients get the 2025-03-26 shape. */
function describeTool(t: Tool, version: ProtocolVersion): Record<string, unknown> {
  const base = { name: t.name, description: t.description, inputSchema: t.inputSchema, annotations: t.annotations };
  return versionAtLeast(version, '2025-06-18') ? { ...base, title: t.title, outputSchema: t.outputSchema } : base;
}

const textResult = (text: string, isError: boolean): Record<string, unknown> => ({ content: [{ type: 'text', text }], isError });

function toolResult(structured: Record<string, unknown>, version: ProtocolVersion): Record<string, unknown> {
  const result = textResult(JSON.stringify(structured), false);
  return versionAtLeast(version, '2025-06-18') ? { ...result, structuredContent: structured } : result;
}

function describeAppError(err: AppError): string {
  const details = (err.details ?? []).map((d) => `${d.path}: ${d.message}`);
  return details.length > 0 ? `${err.message}: ${details.join('; ')}` : err.message;
}

async function callTool(dc: DispatchContext, params: unknown): Promise<Record<string, unknown>> {
  const p = paramsObject(params);
  if (typeof p.name !== 'string') throw invalidParams('params.name must be a string');
  const tool = dc.tools.get(p.name);
  if (!tool) throw invalidParams(`Unknown tool: ${p.name}`, { available: [...dc.tools.keys()] });
  const raw = p.arguments ?? {};
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) throw invalidParams('params.arguments must be an object');

  let args: Record<string, unknown>;
  try {
    // structuredClone recurses: arguments nested thousands deep would overflow the stack.
    if (nestedDeeperThan(raw, MAX_ARGUMENT_DEPTH)) throw validationFailed([{ path: 'arguments', message: `is nested deeper than ${MAX_ARGUMENT_DEPTH} levels` }]);
    args = tool.validate(structuredClone(raw)); // ajv fills defaults in place: never into the caller's object
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
    // 2025-11-25 (SEP-1303) moved argument errors into the tool result so the model can correct itself;
    // earlier versions list them as protocol errors (-32602).
    const message = `Invalid arguments for tool ${tool.name}: ${describeAppError(err)}`;
    if (versionAtLeast(dc.version, '2025-11-25')) return textResult(message, true);
    throw invalidParams(message, { details: err.details ?? [] });
  }

  if (!dc.caller) throw new Error('tools/call reached dispatch without an authenticated caller');
  const started = performance.now();
  const result = await runTool(dc, tool, dc.caller, args);
  // One audit line per call: which account ran which tool, and how it ended.
  const ms = Math.round(performance.now() - started);
  dc.deps.log.info({ request_id: dc.requestId, account_id: dc.caller.accountId, tool: tool.name, is_error: result.isError, ms }, 'mcp tool call');
  return result;
}

async function runTool(dc: DispatchContext, tool: Tool, caller: ToolCaller, args: Record<string, unknown>): Promise<Record<string, unknown>> {
  try {
    const structured = await tool.run({ deps: dc.deps, caller, signal: dc.signal }, args);
    return toolResult(structured, dc.version);
  } catch (err) {
    // The client hung up: nobody reads this answer, and it is not a server fault worth an error log.
    if (dc.signal.aborted) return textResult('Cancelled: the client disconnected', true);
    // Failures the caller can act on (not found, rejected URL, dependency down) are tool results, not protocol errors.
    if (err instanceof AppError && err.code !== 'internal') return textResult(describeAppError(err), true);
    if (isDependencyError(err)) {
      dc.deps.log.warn({ err, request_id: dc.requestId, tool: tool.name }, 'dependency unavailable during tool call');
      return textResult('A backing service is unavailable, try again shortly', true);
    }
    throw err;
  }
}
