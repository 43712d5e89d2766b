/**
 * POST /api/mcp: MCP's Streamable HTTP transport, stateless, on the official
 * SDK (a Server and a WebStandardStreamableHTTPServerTransport per POST, no
 * Mcp-Session-Id, JSON responses). Any API pod answers any request. What we
 * add on top: the Origin check, the body limit, and the API key of tools/call
 * resolved (and charged to its rate) before the SDK runs anything. There is no
 * server-initiated stream, so GET (and DELETE: no sessions) is 405.
 */
import type Router from '@koa/router';
import { MAX_BATCH_SIZE } from '@modelcontextprotocol/sdk/server/requestBody.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { SUPPORTED_PROTOCOL_VERSIONS } from '@modelcontextprotocol/sdk/types.js';
import type { Context } from 'koa';
import { AppError } from '#shared/errors/index.js';
import { unavailableFrom } from '#shared/errors/dependency.js';
import type { Logger } from '#shared/log.js';
import type { ApiDeps } from '../../deps.js';
import { newRouter, publicRoute, route, type RouteDoc, type RouteSpec } from '../../middleware/route.js';
import { mcpDocs } from './doc.js';
import { resolveToolCaller } from './caller.js';
import { answerInvalidParams, createMcpServer } from './server.js';
import { byteLimit, checkOrigin, errorResponse, HttpRefusal, readJson, refusal, refusalFromAppError, type RequestId, respond, RPC, setCors, webRequest } from './transport.js';
import { createTools, type Tool } from './tools.js';

const MCP_PATH = '/api/mcp';

/** The most messages one POST may hold: the SDK's bound, refused before any key is charged. */
export const MAX_BATCH = MAX_BATCH_SIZE;

/** The protocol revisions served, newest first: the SDK's. */
export const PROTOCOL_VERSIONS: readonly string[] = SUPPORTED_PROTOCOL_VERSIONS;

export function mcpRoutes(deps: ApiDeps): Router {
  const router = newRouter();
  // Open at the HTTP level (initialize, tools/list and ping need no credential); tools/call
  // resolves its API key in resolveToolCaller before any tool runs. The body is read here, so a
  // malformed one is answered in JSON-RPC.
  const tools = createTools(deps.config);
  const docs = mcpDocs([...tools.values()], PROTOCOL_VERSIONS, MAX_BATCH);
  const at = (method: RouteSpec['method'], doc: RouteDoc): RouteSpec => ({ method, path: MCP_PATH, guard: publicRoute('mcp_tool_key'), body: 'own', doc });
  // A CORS preflight carries no credential by design; it only answers which methods and headers are allowed.
  const preflight: RouteSpec = { method: 'options', path: MCP_PATH, guard: publicRoute(), body: 'none', doc: docs.preflight };
  const limit = byteLimit(deps.config.http.bodyLimit);
  const guard = { allowed: deps.config.mcp.allowedOrigins, log: deps.log };

  route(router, deps.config.http, at('post', docs.post), (ctx) => guarded(ctx, guard, false, () => post(ctx, deps, tools, limit)));

  route(router, deps.config.http, preflight, (ctx) =>
    guarded(ctx, guard, true, async () => {
      ctx.set('Allow', 'POST, OPTIONS');
      ctx.body = null;
      ctx.status = 204;
    }),
  );

  // No server-initiated SSE stream (GET) and no sessions to end (DELETE): the transport spec's 405.
  route(router, deps.config.http, at('all', docs.other), (ctx) =>
    guarded(ctx, guard, false, async () => {
      ctx.set('Allow', 'POST, OPTIONS');
      throw new HttpRefusal(405, {
        code: RPC.SERVER_ERROR,
        message: `Method Not Allowed: ${ctx.method} ${MCP_PATH}; this server takes POST only and opens no server-initiated stream`,
        data: { code: 'method_not_allowed' },
      });
    }),
  );

  return router;
}

interface Guard {
  allowed: readonly string[];
  log: Logger;
}

/** Origin check and CORS first, then the handler; a refusal becomes a JSON-RPC error body with its HTTP status. */
async function guarded(ctx: Context, guard: Guard, preflight: boolean, handler: () => Promise<void>): Promise<void> {
  try {
    setCors(ctx, checkOrigin(ctx, guard.allowed), preflight);
    await handler();
  } catch (caught) {
    const err = asRefusal(caught, guard.log, ctx);
    ctx.vary('Origin');
    const data = { ...(err.rpc.data as Record<string, unknown>), request_id: ctx.state.requestId };
    ctx.status = err.status;
    for (const [name, value] of Object.entries(err.headers)) ctx.set(name, value);
    ctx.body = errorResponse(ctx.state.mcpRequestId as RequestId | undefined, { ...err.rpc, data });
  }
}

/** Anything else that escaped (a bug, a dependency outage) still answers in JSON-RPC, exposing nothing. */
function asRefusal(err: unknown, log: Logger, ctx: Context): HttpRefusal {
  if (err instanceof HttpRefusal) return err;
  if (err instanceof AppError) return refusalFromAppError(err);
  const down = unavailableFrom(err);
  if (down) {
    log.warn({ err, request_id: ctx.state.requestId }, 'dependency unavailable');
    return refusalFromAppError(down);
  }
  log.error({ err, request_id: ctx.state.requestId, path: ctx.path }, 'unhandled error');
  return new HttpRefusal(500, { code: RPC.INTERNAL_ERROR, message: 'Internal error', data: { code: 'internal' } });
}

/** A JSON-RPC request object (it has a method and an id): what the SDK will answer. */
const isRequest = (m: unknown): m is { id: unknown; method: unknown } => typeof m === 'object' && m !== null && 'method' in m && 'id' in m;
const isRequestId = (v: unknown): v is RequestId => typeof v === 'string' || (typeof v === 'number' && Number.isInteger(v));

async function post(ctx: Context, deps: ApiDeps, tools: ReadonlyMap<string, Tool>, limit: number): Promise<void> {
  const body = await readJson(ctx, limit);
  const messages: unknown[] = Array.isArray(body) ? body : [body];
  // A refusal of a single request carries its id, so the client can match it.
  if (!Array.isArray(body) && isRequest(body) && isRequestId(body.id)) ctx.state.mcpRequestId = body.id;
  if (messages.length > MAX_BATCH) throw refusal(400, 'bad_request', `Invalid Request: a batch holds at most ${MAX_BATCH} messages`, RPC.INVALID_REQUEST);

  // tools/call needs the key, each call charged to its rate: resolved here so a refusal is the POST's HTTP status.
  const toolCalls = messages.filter((m) => isRequest(m) && m.method === 'tools/call').length;
  const caller = toolCalls > 0 ? await resolveToolCaller(deps, ctx, toolCalls) : null;

  // A client that hangs up stops its long waits instead of leaving them to time out.
  const controller = new AbortController();
  const onClose = (): void => {
    if (!ctx.res.writableEnded) controller.abort();
  };
  ctx.res.once('close', onClose);
  // A client that hung up while its key was being checked has already closed: no 'close' will come.
  if (ctx.res.destroyed) controller.abort();

  const server = createMcpServer({ deps, tools, caller, signal: controller.signal, requestId: String(ctx.state.requestId) });
  const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  try {
    await server.connect(transport);
    answerInvalidParams(transport);
    await respond(ctx, await transport.handleRequest(webRequest(ctx), { parsedBody: body }));
  } finally {
    ctx.res.off('close', onClose);
    await server.close();
  }
}
