/**
 * What the OpenAPI document says about POST /api/mcp: MCP's JSON-RPC messages
 * as this server reads and answers them, registered with the routes
 * (routes.ts). Tool arguments and results are the tools' own schemas, which
 * are the HTTP routes' shapes (schemas.ts).
 */
import type { RouteDoc } from '../../middleware/route.js';
import { component, type TSchema, Type } from '../../shapes.js';
import type { Tool } from './tools.js';
import { RPC } from './transport.js';

const shape = (name: string, schema: Record<string, unknown>): TSchema => component(name, Type.Unsafe(schema));

const requestId = { anyOf: [{ type: 'string' }, { type: 'integer' }], description: 'JSON-RPC id (MCP: a string or an integer)' };

const rpcRequest = (method: string, params: unknown, description: string): Record<string, unknown> => ({
  type: 'object',
  description,
  required: ['jsonrpc', 'id', 'method'],
  properties: { jsonrpc: { const: '2.0' }, id: requestId, method: { const: method }, params },
});

const ErrorResponse = shape('mcp.ErrorResponse', {
  type: 'object',
  required: ['jsonrpc', 'error'],
  properties: {
    jsonrpc: { const: '2.0' },
    id: { anyOf: [{ type: 'string' }, { type: 'integer' }, { type: 'null' }], description: "Absent or null when the request's id could not be read" },
    error: {
      type: 'object',
      required: ['code', 'message'],
      properties: {
        code: { type: 'integer', description: `JSON-RPC code: ${Object.entries(RPC).map(([name, code]) => `${code} ${name}`).join(', ')}` },
        message: { type: 'string' },
        data: { description: 'On our refusals at the HTTP level (credential, rate limit, Origin, body): `{code, request_id, details?}` with the same `code` as the rest of the API' },
      },
    },
  },
});

const Response = shape('mcp.Response', {
  oneOf: [
    { type: 'object', required: ['jsonrpc', 'id', 'result'], properties: { jsonrpc: { const: '2.0' }, id: requestId, result: { type: 'object', description: 'As the MCP specification defines for the method' } } },
    ErrorResponse,
  ],
});

function requestShape(tools: Tool[], versions: readonly string[]): TSchema {
  const toolCall = (t: Tool) => ({
    type: 'object',
    required: ['name'],
    properties: { name: { const: t.name }, arguments: shape(`mcp.${t.name}.arguments`, t.inputSchema) },
  });
  return shape('mcp.Request', {
    description: 'One JSON-RPC 2.0 request. `tools/call` needs the account API key; the other methods need no credential.',
    oneOf: [
      rpcRequest('initialize', { type: 'object', required: ['protocolVersion'], properties: { protocolVersion: { type: 'string', examples: [...versions] }, capabilities: { type: 'object' }, clientInfo: { type: 'object' } } }, 'Version negotiation; must not be part of a batch'),
      rpcRequest('ping', { type: 'object' }, 'Liveness'),
      rpcRequest('tools/list', { type: 'object' }, 'The tools, with their input and output schemas'),
      rpcRequest('tools/call', { oneOf: tools.map(toolCall) }, "Runs a tool; the result carries `structuredContent` matching the tool's `mcp.<name>.result` schema"),
      {
        type: 'object',
        description: 'A notification (no id): accepted, never answered',
        required: ['jsonrpc', 'method'],
        properties: { jsonrpc: { const: '2.0' }, method: { type: 'string', examples: ['notifications/initialized'] }, params: { type: 'object' } },
        not: { required: ['id'] },
      },
    ],
  });
}

const rpcError = (description: string) => ({ description, schema: ErrorResponse });

interface McpDocs {
  post: RouteDoc;
  preflight: RouteDoc;
  other: RouteDoc;
}

/** The docs of the three MCP routes: POST, the CORS preflight, and every other method (405). */
export function mcpDocs(tools: Tool[], versions: readonly string[], maxBatch: number): McpDocs {
  const request = requestShape(tools, versions);
  return {
    post: {
      operationId: 'mcp',
      tags: ['mcp'],
      summary: 'MCP (Streamable HTTP, stateless): JSON-RPC requests for AI agents',
      description: `One JSON-RPC message or a batch of up to ${maxBatch}. \`initialize\`, \`ping\` and \`tools/list\` need no credential; \`tools/call\` needs the account API key (\`Authorization: Bearer svc_…\` or \`X-API-Key\`), each call counting against its rate limit. Send \`MCP-Protocol-Version\` after initialize (${versions.join(', ')}). Browser requests must come from an origin on MCP_ALLOWED_ORIGINS. Tool \`wait_for_event\` is the long-poll. Errors here use JSON-RPC's shape, not the API's.`,
      extra: { externalDocs: { url: 'https://modelcontextprotocol.io/specification', description: 'The MCP specification' } },
      headers: [{ name: 'MCP-Protocol-Version', in: 'header', required: false, schema: { type: 'string', enum: [...versions] } }],
      // Listed for readers: tools/call's `result.structuredContent` matches the tool's.
      components: tools.map((t) => shape(`mcp.${t.name}.result`, t.outputSchema)),
      body: Type.Unsafe({ oneOf: [request, { type: 'array', minItems: 1, maxItems: maxBatch, items: request }] }),
      responses: {
        '200': { description: 'The answer (an array for a batch)', schema: Type.Unsafe({ oneOf: [Response, { type: 'array', items: Response }] }) },
        '202': { description: 'Only notifications or responses were sent: nothing to answer' },
        '400': rpcError('Parse error (-32700), invalid request (-32600) or an unsupported MCP-Protocol-Version'),
        '401': rpcError('tools/call without a valid API key'),
        '403': rpcError('A browser Origin that is not allowed'),
        '406': rpcError('The client accepts no application/json'),
        '413': rpcError('Body over BODY_LIMIT'),
        '415': rpcError('Not UTF-8 application/json'),
        '429': rpcError("The API key's rate limit"),
        '503': rpcError('Kafka or MongoDB unavailable'),
        default: rpcError('Any other failure, as a JSON-RPC error'),
      },
    },
    preflight: {
      operationId: 'mcpPreflight',
      tags: ['mcp'],
      summary: 'CORS preflight for allowed browser origins',
      responses: { '204': { description: 'Allowed' }, '403': rpcError('Origin not allowed'), default: rpcError('Any other failure, as a JSON-RPC error') },
    },
    other: {
      operationId: 'mcpGet',
      tags: ['mcp'],
      summary: 'Not offered: no server-initiated stream (also DELETE: no sessions)',
      security: [],
      documentAs: 'get',
      responses: { '403': rpcError('A browser Origin that is not allowed (checked first)'), '405': rpcError('POST only'), default: rpcError('Any other failure, as a JSON-RPC error') },
    },
  };
}
