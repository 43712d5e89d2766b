/**
 * The `paths` and `components.schemas` of the OpenAPI document, generated from
 * the route registry (middleware/route.ts): each route's method, path, guard
 * and the shapes it validates with and answers with (api/src/shapes.ts).
 * A shape named with `component()` is emitted once under components.schemas
 * and referenced with `$ref` everywhere it is used.
 */
import type { Access, RegisteredRoute, RouteResponse } from '../../middleware/route.js';
import { componentName, type TObject } from '../../shapes.js';
import { RATE_HEADERS, type SchemaObject } from './components.js';

/** The security an access kind implies; a route's doc may say otherwise (metrics without a token). */
const SECURITY: Record<Access, Record<string, string[]>[]> = {
  public: [],
  account: [{ session: [] }, { apiKey: [] }, { apiKeyHeader: [] }],
  ingest_token: [{ ingestToken: [] }],
  metrics_token: [{ metricsToken: [] }],
  stream_token: [{ streamToken: [] }],
  mcp_tool_key: [{}, { apiKey: [] }, { apiKeyHeader: [] }],
};

/** Collects the named shapes met while converting, each converted once. */
export class Components {
  readonly schemas: Record<string, SchemaObject> = {};
  private readonly canonical = new Map<string, unknown>();

  /** A shape as an OpenAPI schema object: TypeBox's symbols dropped, named shapes as `$ref`s. */
  schema(node: unknown, isDefinition = false): unknown {
    if (Array.isArray(node)) return node.map((n) => this.schema(n));
    if (node === null || typeof node !== 'object') return node;
    const name = componentName(node);
    if (name !== undefined && !isDefinition) return this.reference(name, node as SchemaObject);
    const out: SchemaObject = {};
    for (const [key, value] of Object.entries(node)) {
      if (key === 'nullable') continue;
      out[key] = key === 'examples' || key === 'default' || key === 'const' || key === 'enum' ? structuredClone(value) : this.schema(value);
    }
    // ajv's `nullable: true` (kept on a few request fields for ajv's error messages) is a type list in JSON Schema 2020-12.
    if ((node as SchemaObject).nullable === true) {
      if (typeof out.type !== 'string') throw new Error('nullable needs a single type');
      out.type = [out.type, 'null'];
      if (Array.isArray(out.enum)) out.enum = [...(out.enum as unknown[]), null];
    }
    return out;
  }

  private reference(name: string, node: SchemaObject): SchemaObject {
    const ref: SchemaObject = { $ref: `#/components/schemas/${name}` };
    const seen = this.canonical.get(name) as SchemaObject | undefined;
    if (seen === undefined) {
      this.canonical.set(name, node);
      this.schemas[name] = {}; // placeholder: a shape that refers to itself stops here
      this.schemas[name] = this.schema(node, true) as SchemaObject;
    } else if (seen !== node) {
      if (withoutDescription(seen) !== withoutDescription(node)) throw new Error(`two different shapes are named ${name}`);
      // A copy with its own description (described()) keeps it beside the reference.
      if (typeof node.description === 'string' && node.description !== seen.description) ref.description = node.description;
    }
    return ref;
  }
}

const withoutDescription = (node: unknown): string => JSON.stringify({ ...(node as SchemaObject), description: undefined });

const requestIdHeader = { 'X-Request-Id': { $ref: '#/components/headers/RequestId' } };

function parameters(schema: TObject | undefined, where: 'path' | 'query', components: Components): SchemaObject[] {
  if (!schema) return [];
  const required = new Set(schema.required ?? []);
  return Object.entries(schema.properties).map(([name, prop]) => {
    const { description, ...rest } = components.schema(prop) as SchemaObject;
    return { name, in: where, required: where === 'path' || required.has(name), ...(description ? { description } : {}), schema: rest };
  });
}

function response(r: RouteResponse, status: string, access: Access, components: Components): SchemaObject {
  if ('$ref' in r) return r;
  const rate = access === 'account' && /^2/.test(status) && r.schema !== undefined ? RATE_HEADERS : {};
  const out: SchemaObject = { description: r.description };
  if (r.schema !== undefined || r.headers) out.headers = { ...requestIdHeader, ...rate, ...r.headers };
  if (r.schema !== undefined) out.content = { [r.type ?? 'application/json']: { schema: components.schema(r.schema), ...(components.schema(r.media ?? {}) as SchemaObject) } };
  return out;
}

function operation(route: RegisteredRoute, components: Components): SchemaObject {
  const doc = route.doc!;
  for (const shape of doc.components ?? []) components.schema(shape);
  const params = [...parameters(doc.params, 'path', components), ...parameters(doc.query, 'query', components), ...(doc.headers ?? [])];
  return {
    operationId: doc.operationId,
    tags: doc.tags,
    summary: doc.summary,
    ...(doc.description ? { description: doc.description } : {}),
    ...doc.extra,
    security: doc.security ?? SECURITY[route.access],
    ...(params.length > 0 ? { parameters: params } : {}),
    ...(doc.body ? { requestBody: { required: doc.bodyRequired ?? true, content: { 'application/json': { schema: components.schema(doc.body) } } } } : {}),
    responses: Object.fromEntries(Object.entries(doc.responses).map(([status, r]) => [status, response(r, status, route.access, components)])),
  };
}

/** The document's paths for every route registered with a doc. */
export function generatePaths(routes: RegisteredRoute[], components: Components): Record<string, Record<string, SchemaObject>> {
  const paths: Record<string, Record<string, SchemaObject>> = {};
  for (const route of routes) {
    if (!route.doc) continue;
    const method = route.method === 'all' ? route.doc.documentAs : route.method;
    if (!method) throw new Error(`route ALL ${route.path} needs documentAs`);
    const item = (paths[route.path] ??= {});
    if (item[method]) throw new Error(`${method.toUpperCase()} ${route.path} is registered twice`);
    item[method] = operation(route, components);
  }
  return paths;
}
