import { Ajv, type ErrorObject, type JSONSchemaType, type Schema, type ValidateFunction } from 'ajv';
import addFormatsImport from 'ajv-formats';
import { type AppError, validationFailed, type ErrorDetail } from '#shared/errors/index.js';

// ajv-formats is CommonJS with a default export; under NodeNext it arrives wrapped.
type AddFormats = (ajv: Ajv) => Ajv;
const addFormats: AddFormats =
  (addFormatsImport as unknown as { default?: AddFormats }).default ?? (addFormatsImport as unknown as AddFormats);

const ajv = new Ajv({ allErrors: true, strict: true, useDefaults: true, coerceTypes: false });
addFormats(ajv);

/** Query strings arrive as strings: this instance coerces them to the schema's types. */
const queryAjv = new Ajv({ allErrors: true, strict: true, useDefaults: true, coerceTypes: true });
addFormats(queryAjv);

function toDetails(errors: ErrorObject[] | null | undefined, root: string): ErrorDetail[] {
  return (errors ?? []).map((e) => {
    let path = e.instancePath.replace(/^\//, '').replace(/\//g, '.');
    if (e.keyword === 'required') path = [path, (e.params as { missingProperty: string }).missingProperty].filter(Boolean).join('.');
    if (e.keyword === 'additionalProperties') {
      path = [path, (e.params as { additionalProperty: string }).additionalProperty].filter(Boolean).join('.');
      return { path: path || root, message: 'is not an allowed field' };
    }
    return { path: path || root, message: messageOf(e) };
  });
}

/** At most this many allowed values are listed in one message. */
const MAX_LISTED = 20;

const shown = (v: unknown): string => (typeof v === 'string' ? v : JSON.stringify(v));

/** ajv's message, with the allowed values named where ajv says only "one of the allowed values". */
function messageOf(e: ErrorObject): string {
  if (e.keyword === 'enum') {
    const allowed = (e.params as { allowedValues: unknown[] }).allowedValues;
    const listed = allowed.slice(0, MAX_LISTED).map(shown).join(', ');
    return `must be one of: ${listed}${allowed.length > MAX_LISTED ? `, … (${allowed.length} in all)` : ''}`;
  }
  if (e.keyword === 'const') return `must be ${shown((e.params as { allowedValue: unknown }).allowedValue)}`;
  return e.message ?? 'is invalid';
}

export interface Validator<T> {
  schema: Schema;
  (value: unknown): T;
}

/**
 * At most this many problems are listed: a 1 MB body of unknown keys would
 * otherwise earn a multi-megabyte answer (one detail per key).
 */
export const MAX_DETAILS = 50;

function failed(details: ErrorDetail[]): AppError {
  if (details.length <= MAX_DETAILS) return validationFailed(details);
  return validationFailed(details.slice(0, MAX_DETAILS), `Request validation failed (${details.length} problems, first ${MAX_DETAILS} shown)`);
}

// In unicode mode a surrogate range matches only a surrogate that is not half of a pair.
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

/**
 * The first value ajv lets through that must not pass: a string (value or
 * key) holding a lone surrogate, which JSON can carry as "\ud800" but UTF-8
 * storage cannot (MongoDB would silently store U+FFFD instead); or a number
 * that is not finite ("1e400" in a JSON body, or coerced from a query string:
 * ajv skips minimum/maximum for Infinity, so `limit=1e400` passed
 * `maximum: 500`). Iterative, so any nesting depth is fine.
 */
function unacceptable(value: unknown, root: string): ErrorDetail | null {
  const stack: [unknown, string][] = [[value, '']];
  while (stack.length > 0) {
    const [v, path] = stack.pop()!;
    if (typeof v === 'number') {
      if (!Number.isFinite(v)) return { path: path || root, message: 'must be a finite number' };
    } else if (typeof v === 'string') {
      if (LONE_SURROGATE.test(v)) return { path: path || root, message: 'must be well-formed Unicode (it has a lone surrogate)' };
    } else if (Array.isArray(v)) {
      v.forEach((item, i) => stack.push([item, path ? `${path}.${i}` : String(i)]));
    } else if (v !== null && typeof v === 'object') {
      for (const [key, item] of Object.entries(v)) {
        const at = path ? `${path}.${key}` : key;
        if (LONE_SURROGATE.test(key)) return { path: at.replace(/[\uD800-\uDFFF]/gu, '\uFFFD'), message: 'field names must be well-formed Unicode' };
        stack.push([item, at]);
      }
    }
  }
  return null;
}

/**
 * True when `value` nests objects or arrays more than `max` levels deep.
 * Iterative: for values about to meet recursive code (structuredClone,
 * JSON.stringify), which a few thousand levels would overflow.
 */
export function nestedDeeperThan(value: unknown, max: number): boolean {
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (depth > max) return true;
    for (const item of Array.isArray(v) ? v : Object.values(v)) stack.push([item, depth + 1]);
  }
  return false;
}

function build<T>(instance: Ajv, schema: Schema | JSONSchemaType<T>, root: string): Validator<T> {
  const check: ValidateFunction = instance.compile(schema as Schema);
  const fn = ((value: unknown): T => {
    if (!check(value)) throw failed(toDetails(check.errors, root));
    const problem = unacceptable(value, root);
    if (problem) throw validationFailed([problem]);
    return value as T;
  }) as Validator<T>;
  fn.schema = schema as Schema;
  return fn;
}

/** Compiles a JSON body schema once; the returned function throws a 400 listing every bad field. */
export const bodyValidator = <T>(schema: Schema | JSONSchemaType<T>): Validator<T> => build<T>(ajv, schema, 'body');

/** For JSON values that are not a request body (MCP tool arguments): `root` names the whole value in details. */
export const valueValidator = <T>(schema: Schema | JSONSchemaType<T>, root: string): Validator<T> => build<T>(ajv, schema, root);

/** Same for query strings, with type coercion ("50" -> 50). */
export const queryValidator = <T>(schema: Schema | JSONSchemaType<T>): Validator<T> => build<T>(queryAjv, schema, 'query');
