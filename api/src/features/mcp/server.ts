/**
 * The MCP server of one POST, on the official SDK: it answers initialize,
 * ping, tools/list and tools/call. JSON-RPC framing, batches, version
 * negotiation and the Streamable HTTP checks are the SDK's; what is ours is
 * the tools, who may call them (routes.ts resolves the key first), and how
 * tool failures read to a model.
 */
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import {
  CallToolRequestSchema,
  CancelledNotificationSchema,
  DEFAULT_NEGOTIATED_PROTOCOL_VERSION,
  ErrorCode,
  InitializeRequestSchema,
  isJSONRPCRequest,
  ListToolsRequestSchema,
  PingRequestSchema,
  type CallToolResult,
  type ServerNotification,
  type ServerRequest,
  type Tool as ToolDescription,
} from '@modelcontextprotocol/sdk/types.js';
import { AppError, validationFailed } from '#shared/errors/index.js';
import { unavailableFrom } from '#shared/errors/dependency.js';
import type { ApiDeps } from '../../deps.js';
import { nestedDeeperThan } from '../../validation.js';
import { serverVersion } from './server-info.js';
import type { Tool, ToolCaller } from './tools.js';

/** No tool takes arguments nested anywhere near this deep. */
const MAX_ARGUMENT_DEPTH = 32;

const INSTRUCTIONS = [
  "This server gives an AI agent the event log of one account on a voice and messaging platform: calls starting and ending, transcripts and post-call insights, human takeovers, SMS/WhatsApp messages received and sent, and webhook test pings.",
  'To react to events, call wait_for_event in a loop. It waits up to 55 s and returns one event, or {event: null, timed_out: true}. Pass the `cursor` of the last event you handled as `since`, so nothing is missed or seen twice between calls.',
  'list_events reads past events page by page (pass the returned `cursor` back as `since`). The webhook tools manage HTTPS push subscriptions. whoami tells which account the key belongs to.',
  'tools/call needs the account API key: `Authorization: Bearer svc_...`.',
].join('\n');

/** What one POST brings to its server: the tools, the key's account (when it holds a tools/call), and its hang-up signal. */
interface PostContext {
  deps: ApiDeps;
  tools: ReadonlyMap<string, Tool>;
  /** Resolved from the `svc_` key before the POST reached the SDK; null when it held no tools/call. */
  caller: ToolCaller | null;
  /** Aborted when the HTTP client goes away: long waits stop then. */
  signal: AbortSignal;
  requestId: string;
}

/** A JSON-RPC error the SDK sends as is (its McpError would prefix the message with "MCP error <code>:"). */
class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly data?: unknown,
  ) {
    super(message);
    this.name = 'RpcError';
  }
}

type Extra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/**
 * The protocol version a request after initialize speaks: its MCP-Protocol-Version header (the SDK's
 * transport has refused unsupported ones), else 2025-03-26 as the Streamable HTTP transport says.
 */
function versionOf(extra: Extra): string {
  const header = extra.requestInfo?.headers['mcp-protocol-version'];
  return (Array.isArray(header) ? header[0] : header) ?? DEFAULT_NEGOTIATED_PROTOCOL_VERSION;
}

/** Version strings are dates, so they compare as strings. `title`, `outputSchema` and `structuredContent` arrived in 2025-06-18. */
const since = (version: string, revision: string): boolean => version >= revision;

interface RequestSchemaLike {
  safeParse(value: unknown): { success: true } | { success: false; error: { issues: { path: PropertyKey[]; message: string }[] } };
}

/** The SDK's schema of each method served, to check params against before the SDK dispatches. */
const METHOD_SCHEMAS = new Map<string, RequestSchemaLike>([
  ['initialize', InitializeRequestSchema],
  ['ping', PingRequestSchema],
  ['tools/list', ListToolsRequestSchema],
  ['tools/call', CallToolRequestSchema],
]);

/**
 * SDK 1.x answers a request whose params fail its method's schema with -32603 Internal error and the
 * parser's dump (modelcontextprotocol/typescript-sdk#2284). Such requests are answered here, through
 * the transport, with -32602 Invalid params, as JSON-RPC says; the rest go on to the server.
 */
export function answerInvalidParams(transport: Transport): void {
  const deliver = transport.onmessage;
  transport.onmessage = (message, extra) => {
    // A Map: a method named like an object's own property (`constructor`, `toString`) is no schema.
    const schema = isJSONRPCRequest(message) ? METHOD_SCHEMAS.get(message.method) : undefined;
    const checked = schema?.safeParse(message);
    if (isJSONRPCRequest(message) && checked && !checked.success) {
      const problems = checked.error.issues.map((i) => `${i.path.map(String).join('.')}: ${i.message}`).join('; ');
      void transport.send({ jsonrpc: '2.0', id: message.id, error: { code: ErrorCode.InvalidParams, message: `Invalid params for ${message.method}: ${problems}`.slice(0, 500) } });
      return;
    }
    deliver?.(message, extra);
  };
}

/**
 * A Server builds its own Ajv instance unless given a validator (a visible share of a POST's CPU);
 * it would validate only elicitation answers, which a stateless server never asks for: one serves all.
 */
const jsonSchemaValidator = new AjvJsonSchemaValidator();

/**
 * A stateless server for one POST; the SDK documents one server and transport per request in stateless
 * mode. The low-level Server (not McpServer): our tools are JSON Schemas checked by the API's own ajv
 * validators, which McpServer's zod-based tool registration does not take.
 */
export function createMcpServer(pc: PostContext): Server {
  const serverInfo = { name: 'event-platform', title: 'Event platform', version: serverVersion() };
  // Stateless: the tool list never changes while the server runs, and no server-to-client messages exist
  // (so no `logging`: there is no logging/setLevel to honour).
  const server = new Server(serverInfo, { capabilities: { tools: { listChanged: false } }, instructions: INSTRUCTIONS, jsonSchemaValidator });
  // A server lives for one POST, so notifications/cancelled can only name a request of the same POST.
  // The SDK would then drop that request's answer, and a JSON response waits for every answer: the POST
  // would never be answered. Cancelling is a hint (the MCP spec lets a server answer anyway): we answer.
  // A wait ends early when its connection closes.
  server.setNotificationHandler(CancelledNotificationSchema, () => undefined);
  server.setRequestHandler(ListToolsRequestSchema, (_request, extra) => ({
    tools: [...pc.tools.values()].map((t) => describeTool(t, versionOf(extra))),
  }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    try {
      return await callTool(pc, request.params.name, request.params.arguments ?? {}, versionOf(extra));
    } catch (err) {
      if (err instanceof RpcError) throw err;
      // Anything else is a defect: logged here, and its message stays here.
      pc.deps.log.error({ err, request_id: pc.requestId, method: 'tools/call' }, 'mcp request failed');
      throw new RpcError(ErrorCode.InternalError, 'Internal error');
    }
  });
  return server;
}

function describeTool(t: Tool, version: string): ToolDescription {
  const base = { name: t.name, description: t.description, inputSchema: t.inputSchema as ToolDescription['inputSchema'], annotations: t.annotations };
  return since(version, '2025-06-18') ? { ...base, title: t.title, outputSchema: t.outputSchema as ToolDescription['outputSchema'] } : base;
}

const textResult = (text: string, isError: boolean): CallToolResult => ({ content: [{ type: 'text', text }], isError });

function toolResult(structured: Record<string, unknown>, version: string): CallToolResult {
  const result = textResult(JSON.stringify(structured), false);
  return since(version, '2025-06-18') ? { ...result, structuredContent: structured } : result;
}

function describeAppError(err: AppError): string {
  const details = (err.details ?? []).map((d) => `${d.path}: ${d.message}`);
  return details.length > 0 ? `${err.message}: ${details.join('; ')}` : err.message;
}

async function callTool(pc: PostContext, name: string, raw: Record<string, unknown>, version: string): Promise<CallToolResult> {
  const tool = pc.tools.get(name);
  if (!tool) throw new RpcError(ErrorCode.InvalidParams, `Unknown tool: ${name}`, { available: [...pc.tools.keys()] });

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
    if (since(version, '2025-11-25')) return textResult(message, true);
    throw new RpcError(ErrorCode.InvalidParams, message, { details: err.details ?? [] });
  }

  // routes.ts resolves the key of every POST holding a tools/call; this is the second lock on the door.
  if (!pc.caller) throw new Error('tools/call reached the MCP server without an authenticated caller');
  const started = performance.now();
  const result = await runTool(pc, tool, pc.caller, args, version);
  // One audit line per call: which account ran which tool, and how it ended.
  const ms = Math.round(performance.now() - started);
  pc.deps.log.info({ request_id: pc.requestId, account_id: pc.caller.accountId, tool: tool.name, is_error: result.isError, ms }, 'mcp tool call');
  return result;
}

async function runTool(pc: PostContext, tool: Tool, caller: ToolCaller, args: Record<string, unknown>, version: string): Promise<CallToolResult> {
  try {
    return toolResult(await tool.run({ deps: pc.deps, caller, signal: pc.signal }, args), version);
  } catch (err) {
    // The client hung up: nobody reads this answer, and it is not a server fault worth an error log.
    if (pc.signal.aborted) return textResult('Cancelled: the client disconnected', true);
    // Failures the caller can act on (not found, rejected URL, dependency down) are tool results, not protocol errors.
    if (err instanceof AppError && err.code !== 'internal') return textResult(describeAppError(err), true);
    const down = unavailableFrom(err);
    if (down) {
      pc.deps.log.warn({ err, request_id: pc.requestId, tool: tool.name }, 'dependency unavailable during tool call');
      return textResult(describeAppError(down), true);
    }
    throw err;
  }
}
