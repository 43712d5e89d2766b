import type Router from '@koa/router';
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { ValidateFunction } from 'ajv';
import addFormatsImport from 'ajv-formats';
import type Koa from 'koa';

type Json = Record<string, any>;
type AddFormats = (ajv: Ajv2020) => Ajv2020;
const addFormats: AddFormats = (addFormatsImport as unknown as { default?: AddFormats }).default ?? (addFormatsImport as unknown as AddFormats);

export const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

export interface RouteEntry {
  path: string;
  /** Lower-case methods; `*` for a route registered with router.all. */
  methods: string[];
}

/** Every route on every @koa/router mounted on the app, path in OpenAPI form (`/:id` -> `/{id}`). */
export function registeredRoutes(app: Koa): RouteEntry[] {
  const routes: RouteEntry[] = [];
  for (const middleware of app.middleware) {
    const router = (middleware as { router?: Router }).router;
    if (!router) continue;
    for (const layer of router.stack) {
      if (layer.methods.length === 0) continue; // router.use middleware, not a route
      const path = String(layer.path).replace(/:([A-Za-z0-9_]+)/g, '{$1}');
      const methods = layer.methods.map((m) => m.toLowerCase());
      const isAll = methods.length > HTTP_METHODS.length;
      // HEAD comes free with every GET; it is not a route of its own.
      routes.push({ path, methods: isAll ? ['*'] : methods.filter((m) => !(m === 'head' && methods.includes('get'))) });
    }
  }
  return routes;
}

const DOC_ID = 'https://openapi.test/openapi.json';

/**
 * Validates response bodies against the document. Strict about fields: every
 * object schema with `properties` is read as `additionalProperties: false`
 * here (the document itself stays open to additions), so a field a route
 * returns but the document does not describe fails the test.
 */
export class ResponseChecker {
  private readonly ajv = new Ajv2020({ strict: false, allErrors: true });
  private readonly doc: Json;
  private readonly validators = new Map<string, ValidateFunction>();
  private readonly templates: { template: string; pattern: RegExp }[];

  constructor(doc: Json) {
    addFormats(this.ajv);
    this.doc = closeObjects(structuredClone(doc));
    this.ajv.addSchema({ ...this.doc, $id: DOC_ID });
    this.templates = Object.keys(this.doc.paths as Json).map((template) => ({
      template,
      pattern: new RegExp('^' + template.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+') + '$'),
    }));
  }

  /** The documented path template a request path (query string and all) was answered by, if the document has `method` on it. */
  templateOf(method: string, path: string): string | null {
    const bare = path.split(/[?#]/)[0] as string;
    const exact = this.doc.paths[bare]?.[method.toLowerCase()] ? bare : null;
    return exact ?? this.templates.find((t) => t.pattern.test(bare) && this.doc.paths[t.template]?.[method.toLowerCase()])?.template ?? null;
  }

  /** The JSON schema of `method path` answering `status` (its own code, else `default`); throws when the document has none. */
  private schemaPointer(method: string, path: string, status: number): string | null {
    const op = this.doc.paths?.[path]?.[method.toLowerCase()];
    if (!op) throw new Error(`the document has no ${method} ${path}`);
    const key = String(status) in op.responses ? String(status) : 'default';
    let response = op.responses[key];
    let pointer = `/paths/${escape(path)}/${method.toLowerCase()}/responses/${key}`;
    if (!response) throw new Error(`the document has no ${status} (nor default) for ${method} ${path}`);
    if (response.$ref) {
      pointer = String(response.$ref).slice(1);
      response = this.at(pointer);
    }
    if (!response.content) return null;
    if (!response.content['application/json']) throw new Error(`${method} ${path} ${status} is not documented as JSON`);
    return `${pointer}/content/application~1json/schema`;
  }

  /** Throws with ajv's errors unless `body` conforms; returns the schema's pointer for the record. */
  check(method: string, path: string, status: number, body: unknown): void {
    const pointer = this.schemaPointer(method, path, status);
    if (pointer === null) {
      if (body !== null && body !== '') throw new Error(`${method} ${path} ${status} is documented without a body but returned ${JSON.stringify(body)}`);
      return;
    }
    let validate = this.validators.get(pointer);
    if (!validate) {
      validate = this.ajv.compile({ $ref: `${DOC_ID}#${pointer}` });
      this.validators.set(pointer, validate);
    }
    if (!validate(body)) throw new Error(`${method} ${path} ${status} does not match the document: ${this.ajv.errorsText(validate.errors)}\n${JSON.stringify(body)}`);
  }

  private at(pointer: string): Json {
    return pointer
      .split('/')
      .slice(1)
      .reduce((node: Json, part) => node[part.replace(/~1/g, '/').replace(/~0/g, '~')], this.doc);
  }
}

function escape(path: string): string {
  return path.replace(/~/g, '~0').replace(/\//g, '~1');
}

function closeObjects(node: any): any {
  if (Array.isArray(node)) return node.map(closeObjects);
  if (node === null || typeof node !== 'object') return node;
  const out: Json = {};
  for (const [k, v] of Object.entries(node)) out[k] = closeObjects(v);
  if (out.properties && typeof out.properties === 'object' && !('additionalProperties' in out) && out.type === 'object') out.additionalProperties = false;
  return out;
}

/**
 * Compiles every schema of the document (components, parameters, headers,
 * request and response bodies) with a strict JSON Schema 2020-12 ajv, which
 * refuses unknown keywords: a typo such as `minLenght` fails here. Returns
 * how many were compiled.
 */
export function compileEverySchema(doc: Json): number {
  const ajv = new Ajv2020({ strict: true, allErrors: true });
  addFormats(ajv);
  const local = (node: any): any => JSON.parse(JSON.stringify(node).replace(/"#\/components\/schemas\//g, '"defs.json#/$defs/'));
  ajv.addSchema({ $id: 'defs.json', $defs: local(doc.components.schemas) });
  let count = 0;
  const compile = (schema: unknown, where: string): void => {
    try {
      ajv.compile(local(schema));
      count += 1;
    } catch (err) {
      throw new Error(`${where}: ${(err as Error).message}`, { cause: err });
    }
  };
  for (const name of Object.keys(doc.components.schemas)) compile({ $ref: `#/components/schemas/${name}` }, `components.schemas.${name}`);
  for (const [name, h] of Object.entries(doc.components.headers as Json)) compile(h.schema, `components.headers.${name}`);
  const items: [string, Json][] = [...Object.entries(doc.paths as Json), ...Object.entries((doc.webhooks ?? {}) as Json).map(([name, item]): [string, Json] => [`webhook ${name}`, item])];
  for (const [path, item] of items) {
    for (const p of item.parameters ?? []) compile(p.schema, `${path} parameter ${p.name}`);
    for (const method of HTTP_METHODS.filter((m) => m in item)) {
      const op = item[method];
      const where = `${method.toUpperCase()} ${path}`;
      for (const p of op.parameters ?? []) compile(p.schema, `${where} parameter ${p.name}`);
      for (const [type, media] of Object.entries((op.requestBody?.content ?? {}) as Json)) compile(media.schema, `${where} body ${type}`);
      for (const [status, r] of Object.entries(op.responses as Json)) {
        for (const [type, media] of Object.entries((r.content ?? {}) as Json)) compile(media.schema, `${where} ${status} ${type}`);
      }
    }
  }
  return count;
}
