import { Ajv, type ErrorObject, type JSONSchemaType, type Schema, type ValidateFunction } from 'ajv';
import addFormatsImport from 'ajv-formats';
import { validationFailed, type ErrorDetail } from '../../shared/src/errors/index.js';

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
    return { path: path || root, message: e.message ?? 'is invalid' };
  });
}

export interface Validator<T> {
  schema: Schema;
  (value: unknown): T;
}

function build<T>(instance: Ajv, schema: Schema | JSONSchemaType<T>, root: string): Validator<T> {
  const check: ValidateFunction = instance.compile(schema as Schema);
  const fn = ((value: unknown): T => {
    if (!check(value)) throw validationFailed(toDetails(check.errors, root));
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
