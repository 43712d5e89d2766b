/**
 * POST /api/mcp: MCP's Streamable HTTP transport, stateless. Every POST
 * carries everything it needs (protocol version header, API key), so any API
 * pod answers any request and no Mcp-Session-Id is issued. Responses are
 * application/json; there is no server-initiated stream, so GET is 405.
 */
import type Router from '@koa/router';
import type { Context } from 'koa';
import { AppError, unavailable } from '../../../../shared/src/errors/index.js';
import { isDependencyError } from '../../../../shared/src/errors/dependency.js';
import type { Logger } from '../../../../shared/src/log.js';
import type { ApiDeps } from '../../deps.js';
import { newRouter, publicRoute, route, type RouteSpec } from '../../middleware/route.js';
import { resolveToolCaller } from './caller.js';
import { dispatch } from './dispatch.js';
import { classify, errorResponse, LATEST_PROTOCOL_VERSION, type Message, type ProtocolVersion, type RequestId, type Response, RPC } from './protocol.js';
import {
  byteLimit,
  checkAccept,
  checkContentType,
  checkOrigin,
  headerVersion,
  HttpRefusal,
  readJson,
  refusalFromAppError,
  setCors,
} from './transport.js';
import { createTools, type Tool, type ToolCaller } from './tools.js';

export const MCP_PATH = '/api/mcp';

/** Batches are JSON-RPC 2.0 (and MCP 2025-03-26); this bounds the work one POST can start. */
export const MAX_BATCH = 50;

export function mcpRoutes(deps: ApiDeps): Router {
  const router = newRouter();
  // Open at the HTTP level (initialize, tools/list and ping need no credential); tools/call
  // resolves its API key in resolveToolCaller before any tool runs. The body is read here, so a
  // malformed one is answered in JSON-RPC.
  const at = (method: RouteSpec['method']): RouteSpec => ({ method, path: MCP_PATH, guard: publicRoute('mcp_tool_key'), body: 'own' });
  // A CORS preflight carries no credential by design; it only answers which methods and headers are allowed.
  const preflight: RouteSpec = { method: 'options', path: MCP_PATH, guard: publicRoute(), body: 'none' };
  const limit = byteLimit(deps.config.http.bodyLimit);
  const tools = createTools(deps.config);
  const guard = { allowed: deps.config.mcp.allowedOrigins, log: deps.log };

  route(router, deps.config.http, at('post'), (ctx) => guarded(ctx, guard, false, () => post(ctx, deps, tools, limit)));

  route(router, deps.config.http, preflight, (ctx) =>
    guarded(ctx, guard, true, async () => {
      ctx.set('Allow', 'POST, OPTIONS');
      ctx.body = null;
      ctx.status = 204;
    }),
  );

  // No server-initiated SSE stream (GET) and no sessions to end (DELETE): the transport spec's 405.
  route(router, deps.config.http, at('all'), (ctx) =>
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
  if (isDependencyError(err)) {
    log.warn({ err, request_id: ctx.state.requestId }, 'dependency unavailable');
    return refusalFromAppError(unavailable('A backing service'));
  }
  log.error({ err, request_id: ctx.state.requestId, path: ctx.path }, 'unhandled error');
  return new HttpRefusal(500, { code: RPC.INTERNAL_ERROR, message: 'Internal error', data: { code: 'internal' } });
}

async function post(ctx: Context, deps: ApiDeps, tools: ReadonlyMap<string, Tool>, limit: number): Promise<void> {
  checkAccept(ctx);
  checkContentType(ctx);
  const body = await readJson(ctx, limit);

  const isBatch = Array.isArray(body);
  const items: unknown[] = isBatch ? body : [body];
  if (items.length === 0) throw invalidRequest('empty batch');
  if (items.length > MAX_BATCH) throw invalidRequest(`a batch holds at most ${MAX_BATCH} messages`);
  const messages = items.map(classify);
  const single = isBatch ? undefined : messages[0];
  if (single?.kind === 'invalid') {
    ctx.state.mcpRequestId = single.id;
    throw invalidRequest(single.reason);
  }
  // A refusal of a single request carries its id, so the client can match it.
  if (single?.kind === 'request') ctx.state.mcpRequestId = single.id;

  // The header describes requests after initialize; a lone initialize negotiates its version from params.
  const version = single?.kind === 'request' && single.method === 'initialize' ? LATEST_PROTOCOL_VERSION : headerVersion(ctx);

  const toolCalls = messages.filter((m) => m.kind === 'request' && m.method === 'tools/call').length;
  const caller = toolCalls > 0 ? await resolveToolCaller(deps, ctx, toolCalls) : null;

  const responses = await answerAll(ctx, messages, { deps, tools, version, caller, isBatch });
  if (responses.length === 0) {
    // Only notifications and responses: accepted, nothing to say.
    ctx.body = null;
    ctx.status = 202;
    return;
  }
  ctx.status = 200;
  ctx.body = isBatch ? responses : responses[0];
}

const invalidRequest = (reason: string): HttpRefusal =>
  new HttpRefusal(400, { code: RPC.INVALID_REQUEST, message: `Invalid Request: ${reason}`, data: { code: 'bad_request' } });

/** Runs the requests of one POST concurrently (JSON-RPC lets batch members run in any order). */
async function answerAll(
  ctx: Context,
  messages: Message[],
  opts: { deps: ApiDeps; tools: ReadonlyMap<string, Tool>; version: ProtocolVersion; caller: ToolCaller | null; isBatch: boolean },
): Promise<Response[]> {
  // A client that hangs up stops its long waits instead of leaving them to time out.
  const controller = new AbortController();
  const onClose = (): void => {
    if (!ctx.res.writableEnded) controller.abort();
  };
  ctx.res.once('close', onClose);
  // A client that hung up while its key was being checked has already closed: no 'close' will come.
  if (ctx.res.destroyed) controller.abort();
  const dc = { deps: opts.deps, tools: opts.tools, version: opts.version, caller: opts.caller, signal: controller.signal, requestId: String(ctx.state.requestId) };
  try {
    const answers = await Promise.all(
      messages.map(async (m): Promise<Response | null> => {
        if (m.kind === 'invalid') return errorResponse(m.id, { code: RPC.INVALID_REQUEST, message: `Invalid Request: ${m.reason}` });
        if (m.kind !== 'request') return null;
        if (m.method === 'initialize' && opts.isBatch) {
          return errorResponse(m.id, { code: RPC.INVALID_REQUEST, message: 'Invalid Request: initialize must not be part of a batch' });
        }
        return dispatch(dc, m.method, m.id, m.params);
      }),
    );
    return answers.filter((a): a is Response => a !== null);
  } finally {
    ctx.res.off('close', onClose);
  }
}
