/**
 * The OpenAPI 3.1 document of the API, generated from the route registry
 * (middleware/route.ts) and the TypeBox shapes the routes validate and answer
 * with. Tests check it against the OpenAPI 3.1 schema, check that every route
 * on the routers is in it, and validate every JSON response the API tests
 * receive against it (api/test/support/api.ts).
 */
import { ERROR_STATUS } from '#shared/errors/index.js';
import type { RegisteredRoute } from '../../middleware/route.js';
import { ErrorSchema, EventRecordSchema } from '../../shapes.js';
import { headers, responses, securitySchemes } from './components.js';
import type { SchemaObject } from './components.js';
import { Components, generatePaths } from './generate.js';
import { outgoingWebhooks } from './outgoing.js';

const DESCRIPTION = `The event service of a voice-and-messaging platform: accounts and API keys, one ordered event log read four ways (cursor polling, long-poll, server-sent events, signed webhook pushes) and an MCP endpoint.

Errors are always \`{"error": {"code", "message", "request_id", "details"?}}\`; the status follows from the code (${Object.entries(ERROR_STATUS)
  .map(([code, status]) => `${code} ${status}`)
  .join(', ')}). Every response carries X-Request-Id. A credential is a session token or the API key (\`Authorization: Bearer\`, or \`X-API-Key\` for the key); API-key traffic is limited to 100 requests per minute per key (429 with Retry-After).`;

/**
 * Generated from the routes registered on the app's routers: every path and
 * every schema comes from a route's registration and the shapes it names.
 * Only what is not a route is written here: the overview, the tags, the
 * shared error responses and security schemes (components.ts) and what a
 * webhook delivery sends (outgoing.ts).
 */
export function buildOpenApiDocument(routes: RegisteredRoute[]): SchemaObject {
  const components = new Components();
  // The shared error responses refer to Error; the outgoing webhook (what a delivery sends) to EventRecord.
  for (const shape of [ErrorSchema, EventRecordSchema]) components.schema(shape);
  const paths = generatePaths(routes, components);
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
    components: { schemas: components.schemas, responses, headers, securitySchemes },
  };
}
