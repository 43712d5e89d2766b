import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { atFileEnd } from '#test-support/cleanup.js';
import { createApp } from '../../src/app.js';
import type { ApiDeps } from '../../src/deps.js';
import type { RunningApi } from '../../src/server.js';
import { call, type JsonResponse } from './api.js';

export const MCP = '/api/mcp';
const JSON_AND_SSE = 'application/json, text/event-stream';

/** A raw JSON-RPC POST, with the Accept header MCP clients send. */
export function rpc(base: string, body: unknown, headers: Record<string, string> = {}): Promise<JsonResponse> {
  return call(base, 'POST', MCP, { body, headers: { accept: JSON_AND_SSE, ...headers } });
}

export function rpcRaw(base: string, raw: string, headers: Record<string, string> = {}): Promise<JsonResponse> {
  return call(base, 'POST', MCP, { raw, headers: { accept: JSON_AND_SSE, ...headers } });
}

/** A tools/call request body. */
export const toolCall = (id: number | string, name: string, args?: Record<string, unknown>) => ({
  jsonrpc: '2.0',
  id,
  method: 'tools/call',
  params: args === undefined ? { name } : { name, arguments: args },
});

/** An MCP client as an agent runs it: the official SDK over Streamable HTTP. */
export async function connectClient(base: string, headers: Record<string, string> = {}): Promise<Client> {
  const client = new Client({ name: 'event-platform-tests', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(MCP, base), { requestInit: { headers } }));
  return client;
}

/**
 * The running app again over changed deps (another config, other limits), on
 * its own port: no second set of Kafka consumers to start. The server listens
 * before `change` runs, so a config may name the server's own URL.
 */
export async function serveWith(api: RunningApi, change: (deps: ApiDeps, url: string) => ApiDeps): Promise<string> {
  const server = http.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  server.on('request', createApp(change(api.deps, url)).callback());
  atFileEnd(
    () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  );
  return url;
}
