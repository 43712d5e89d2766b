/**
 * The OpenAPI 3.1 document of the API, built from the request schemas the
 * routes validate with (each feature's schemas.ts) and the response schemas
 * in components.ts. Tests check it against the OpenAPI 3.1 schema, check that
 * every route on the routers is in it, and validate real responses with it.
 */
import { ERROR_STATUS } from '../../../../shared/src/errors/index.js';
import type { ApiConfig } from '../../config.js';
import type { RegisteredRoute } from '../../middleware/route.js';
import { ErrorSchema, EventRecordSchema } from '../../shapes.js';
import { headers, responses, securitySchemes } from './components.js';
import type { SchemaObject } from './convert.js';
import { Components, generatePaths } from './generate.js';
import { mcpPaths, mcpSchemas } from './paths/mcp.js';
import { opsPaths } from './paths/ops.js';
import { outgoingWebhooks } from './outgoing.js';

const DESCRIPTION = `The event service of a voice-and-messaging platform: accounts and API keys, one ordered event log read four ways (cursor polling, long-poll, server-sent events, signed webhook pushes) and an MCP endpoint.

Errors are always \`{"error": {"code", "message", "request_id", "details"?}}\`; the status follows from the code (${Object.entries(ERROR_STATUS)
  .map(([code, status]) => `${code} ${status}`)
  .join(', ')}). Every response carries X-Request-Id. A credential is a session token or the API key (\`Authorization: Bearer\`, or \`X-API-Key\` for the key); API-key traffic is limited to 100 requests per minute per key (429 with Retry-After).`;

/**
 * The paths of routes registered with a doc are generated from the registry
 * (generate.ts); the hand-written paths (paths/*.ts) still describe the rest
 * until every route is converted.
 */
export function buildOpenApiDocument(config: ApiConfig, routes: RegisteredRoute[]): SchemaObject {
  const components = new Components();
  // The shared error responses refer to Error; the outgoing webhook (what a delivery sends) to EventRecord.
  for (const shape of [ErrorSchema, EventRecordSchema]) components.schema(shape);
  const generated = generatePaths(routes, components);
  const handWritten: Record<string, Record<string, unknown>> = { ...mcpPaths(), ...opsPaths(config) };
  const paths: Record<string, Record<string, unknown>> = {};
  for (const [path, item] of Object.entries(handWritten)) {
    const { parameters, ...ops } = item;
    const left = Object.fromEntries(Object.entries(ops).filter(([method]) => !generated[path]?.[method]));
    if (Object.keys(left).length > 0) paths[path] = { ...(parameters ? { parameters } : {}), ...left };
  }
  for (const [path, item] of Object.entries(generated)) paths[path] = { ...paths[path], ...item };
  return {
    openapi: '3.1.0',
    info: { title: 'Event platform service', version: '1.0.0', description: DESCRIPTION },
    tags: [
      { name: 'accounts', description: 'Signup, login, profile and the platform API key' },
      { name: 'events', description: 'Reading the account\'s events: polling, long-poll, server-sent events' },
      { name: 'ingest', description: 'How producers put events into the log (internal)' },
      { name: 'webhooks', description: 'HTTPS push subscriptions, their delivery attempts, and what a delivery looks like' },
      { name: 'mcp', description: 'Model Context Protocol endpoint for AI agents (tools such as wait_for_event)' },
      { name: 'operations', description: 'Health, readiness, metrics and this document' },
      { name: 'dashboard', description: 'The web dashboard' },
    ],
    paths,
    webhooks: outgoingWebhooks(),
    components: { schemas: { ...mcpSchemas(config), ...components.schemas }, responses, headers, securitySchemes },
  };
}
