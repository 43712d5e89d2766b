/**
 * The OpenAPI 3.1 document of the API, built from the request schemas the
 * routes validate with (each feature's schemas.ts) and the response schemas
 * in components.ts. Tests check it against the OpenAPI 3.1 schema, check that
 * every route on the routers is in it, and validate real responses with it.
 */
import { ERROR_STATUS } from '../../../../shared/src/errors/index.js';
import type { ApiConfig } from '../../config.js';
import { headers, responses, schemas, securitySchemes } from './components.js';
import type { SchemaObject } from './convert.js';
import { activityPaths, activitySchemas } from './paths/activity.js';
import { accountPaths } from './paths/accounts.js';
import { eventPaths } from './paths/events.js';
import { mcpPaths, mcpSchemas } from './paths/mcp.js';
import { opsPaths } from './paths/ops.js';
import { outgoingWebhooks, webhookPaths, webhookSchemas } from './paths/webhooks.js';

const DESCRIPTION = `The event service of a voice-and-messaging platform: accounts and API keys, one ordered event log read four ways (cursor polling, long-poll, server-sent events, signed webhook pushes) and an MCP endpoint.

Errors are always \`{"error": {"code", "message", "request_id", "details"?}}\`; the status follows from the code (${Object.entries(ERROR_STATUS)
  .map(([code, status]) => `${code} ${status}`)
  .join(', ')}). Every response carries X-Request-Id. A credential is a session token or the API key (\`Authorization: Bearer\`, or \`X-API-Key\` for the key); API-key traffic is limited to 100 requests per minute per key (429 with Retry-After).`;

export function buildOpenApiDocument(config: ApiConfig): SchemaObject {
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
    paths: { ...accountPaths(), ...eventPaths(config), ...webhookPaths(config), ...activityPaths(), ...mcpPaths(), ...opsPaths(config) },
    webhooks: outgoingWebhooks(),
    components: { schemas: { ...schemas, ...webhookSchemas, ...activitySchemas, ...mcpSchemas(config) }, responses, headers, securitySchemes },
  };
}
