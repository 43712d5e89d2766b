/**
 * Turns the ajv schemas the routes validate with into OpenAPI 3.1 schema
 * objects (JSON Schema 2020-12). Our ajv schemas are draft-07 plus ajv's
 * `nullable`; the only rewrite needed is `nullable: true` -> a `"null"` type.
 * Anything this does not know how to carry over is an error at build time,
 * so the document never silently says less than the validator checks.
 */
import type { Validator } from '../../validation.js';

export type SchemaObject = Record<string, unknown>;

/** Keywords whose value is a map of subschemas, a subschema, or a list of subschemas. */
const MAP_KEYWORDS = new Set(['properties', 'patternProperties', '$defs']);
const SCHEMA_KEYWORDS = new Set(['items', 'additionalProperties', 'not', 'propertyNames', 'contains', 'if', 'then', 'else']);
const LIST_KEYWORDS = new Set(['anyOf', 'oneOf', 'allOf']);

export function toOpenApiSchema(input: unknown): SchemaObject {
  if (typeof input === 'boolean') return input ? {} : { not: {} };
  if (input === null || typeof input !== 'object' || Array.isArray(input)) throw new Error(`not a JSON schema: ${JSON.stringify(input)}`);
  const out: SchemaObject = {};
  for (const [key, value] of Object.entries(input as SchemaObject)) {
    if (key === 'nullable') continue;
    if (key === 'definitions') throw new Error('draft-07 "definitions" is not carried over: use $defs');
    if (key === 'items' && Array.isArray(value)) throw new Error('draft-07 tuple "items" is not carried over: use prefixItems');
    if (MAP_KEYWORDS.has(key)) out[key] = Object.fromEntries(Object.entries(value as SchemaObject).map(([k, v]) => [k, toOpenApiSchema(v)]));
    else if (SCHEMA_KEYWORDS.has(key) && typeof value === 'object') out[key] = toOpenApiSchema(value);
    else if (LIST_KEYWORDS.has(key)) out[key] = (value as unknown[]).map(toOpenApiSchema);
    else out[key] = structuredClone(value);
  }
  if ((input as SchemaObject).nullable === true) {
    if (typeof out.type === 'string') out.type = [out.type, 'null'];
    else if (out.type !== undefined) throw new Error('nullable with a list of types is not carried over');
    if (Array.isArray(out.enum)) out.enum = [...out.enum, null];
  }
  return out;
}

/** The schema a body validator checks, as an OpenAPI schema. */
export const bodySchema = (validator: Validator<unknown>): SchemaObject => toOpenApiSchema(validator.schema);

export interface Parameter {
  name: string;
  in: 'query' | 'path' | 'header';
  required: boolean;
  description?: string;
  schema: SchemaObject;
}

/** One query parameter per property of a query validator's object schema. */
export function queryParameters(validator: Validator<unknown>, descriptions: Record<string, string> = {}): Parameter[] {
  const schema = validator.schema as { type?: string; properties?: Record<string, unknown>; required?: string[] };
  if (schema.type !== 'object' || !schema.properties) throw new Error('a query schema must be an object with properties');
  const required = new Set(schema.required ?? []);
  return Object.entries(schema.properties).map(([name, prop]) => {
    const param: Parameter = { name, in: 'query', required: required.has(name), schema: toOpenApiSchema(prop) };
    const description = descriptions[name];
    if (description) param.description = description;
    return param;
  });
}
