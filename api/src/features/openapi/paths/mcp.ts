import type { ApiConfig } from '../../../config.js';
import { MAX_BATCH, MCP_PATH, PROTOCOL_VERSIONS } from '../../mcp/routes.js';
import { RPC } from '../../mcp/transport.js';
import { createTools } from '../../mcp/tools.js';
import { ref } from '../components.js';
import { toOpenApiSchema, type SchemaObject } from '../convert.js';

const requestId: SchemaObject = { anyOf: [{ type: 'string' }, { type: 'integer' }], description: 'JSON-RPC id (MCP: a string or an integer)' };

const rpcRequest = (method: string, params: SchemaObject, description: string): SchemaObject => ({
  type: 'object',
  description,
  required: ['jsonrpc', 'id', 'method'],
  properties: { jsonrpc: { const: '2.0' }, id: requestId, method: { const: method }, params },
});

/** MCP's JSON-RPC messages as this server reads and answers them; tool arguments are the tools' own input schemas. */
export function mcpSchemas(config: ApiConfig): Record<string, SchemaObject> {
  const tools = [...createTools(config).values()];
  const out: Record<string, SchemaObject> = {};
  for (const tool of tools) {
    out[`mcp.${tool.name}.arguments`] = toOpenApiSchema(tool.inputSchema);
    out[`mcp.${tool.name}.result`] = toOpenApiSchema(tool.outputSchema);
  }
  const toolCall = (name: string): SchemaObject => ({
    type: 'object',
    required: ['name'],
    properties: { name: { const: name }, arguments: ref(`mcp.${name}.arguments`) },
  });
  return {
    ...out,
    'mcp.Request': {
      description: 'One JSON-RPC 2.0 request. `tools/call` needs the account API key; the other methods need no credential.',
      oneOf: [
        rpcRequest('initialize', { type: 'object', required: ['protocolVersion'], properties: { protocolVersion: { type: 'string', examples: [...PROTOCOL_VERSIONS] }, capabilities: { type: 'object' }, clientInfo: { type: 'object' } } }, 'Version negotiation; must not be part of a batch'),
        rpcRequest('ping', { type: 'object' }, 'Liveness'),
        rpcRequest('tools/list', { type: 'object' }, 'The tools, with their input and output schemas'),
        rpcRequest('tools/call', { oneOf: tools.map((t) => toolCall(t.name)) }, 'Runs a tool; the result carries `structuredContent` matching the tool\'s `mcp.<name>.result` schema'),
        {
          type: 'object',
          description: 'A notification (no id): accepted, never answered',
          required: ['jsonrpc', 'method'],
          properties: { jsonrpc: { const: '2.0' }, method: { type: 'string', examples: ['notifications/initialized'] }, params: { type: 'object' } },
          not: { required: ['id'] },
        },
      ],
    },
    'mcp.Response': {
      oneOf: [
        { type: 'object', required: ['jsonrpc', 'id', 'result'], properties: { jsonrpc: { const: '2.0' }, id: requestId, result: { type: 'object', description: 'As the MCP specification defines for the method' } } },
        ref('mcp.ErrorResponse'),
      ],
    },
    'mcp.ErrorResponse': {
      type: 'object',
      required: ['jsonrpc', 'error'],
      properties: {
        jsonrpc: { const: '2.0' },
        id: { anyOf: [{ type: 'string' }, { type: 'integer' }, { type: 'null' }], description: 'Absent or null when the request\'s id could not be read' },
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
    },
  };
}

const rpcError = (description: string): SchemaObject => ({ description, content: { 'application/json': { schema: ref('mcp.ErrorResponse') } } });

/** POST /api/mcp: MCP's Streamable HTTP transport, stateless, JSON responses only. */
export function mcpPaths(): Record<string, SchemaObject> {
  return {
    [MCP_PATH]: {
      post: {
        operationId: 'mcp',
        tags: ['mcp'],
        summary: 'MCP (Streamable HTTP, stateless): JSON-RPC requests for AI agents',
        description: `One JSON-RPC message or a batch of up to ${MAX_BATCH}. \`initialize\`, \`ping\` and \`tools/list\` need no credential; \`tools/call\` needs the account API key (\`Authorization: Bearer svc_…\` or \`X-API-Key\`), each call counting against its rate limit. Send \`MCP-Protocol-Version\` after initialize (${PROTOCOL_VERSIONS.join(', ')}). Browser requests must come from an origin on MCP_ALLOWED_ORIGINS. Tool \`wait_for_event\` is the long-poll. Errors here use JSON-RPC's shape, not the API's.`,
        externalDocs: { url: 'https://modelcontextprotocol.io/specification', description: 'The MCP specification' },
        security: [{}, { apiKey: [] }, { apiKeyHeader: [] }],
        parameters: [{ name: 'MCP-Protocol-Version', in: 'header', required: false, schema: { type: 'string', enum: [...PROTOCOL_VERSIONS] } }],
        requestBody: {
          required: true,
          content: { 'application/json': { schema: { oneOf: [ref('mcp.Request'), { type: 'array', minItems: 1, maxItems: MAX_BATCH, items: ref('mcp.Request') }] } } },
        },
        responses: {
          '200': { description: 'The answer (an array for a batch)', content: { 'application/json': { schema: { oneOf: [ref('mcp.Response'), { type: 'array', items: ref('mcp.Response') }] } } } },
          '202': { description: 'Only notifications or responses were sent: nothing to answer' },
          '400': rpcError('Parse error (-32700), invalid request (-32600) or an unsupported MCP-Protocol-Version'),
          '401': rpcError('tools/call without a valid API key'),
          '403': rpcError('A browser Origin that is not allowed'),
          '406': rpcError('The client accepts no application/json'),
          '413': rpcError('Body over BODY_LIMIT'),
          '415': rpcError('Not UTF-8 application/json'),
          '429': rpcError('The API key\'s rate limit'),
          '503': rpcError('Kafka or MongoDB unavailable'),
          default: rpcError('Any other failure, as a JSON-RPC error'),
        },
      },
      options: { operationId: 'mcpPreflight', tags: ['mcp'], summary: 'CORS preflight for allowed browser origins', security: [], responses: { '204': { description: 'Allowed' }, '403': rpcError('Origin not allowed') } },
      get: { operationId: 'mcpGet', tags: ['mcp'], summary: 'Not offered: no server-initiated stream (also DELETE: no sessions)', security: [], responses: { '405': rpcError('POST only') } },
    },
  };
}
