import { validateLogin, validateSignup } from '../../auth/schemas.js';
import { authedJson, errors, json, PUBLIC, ref, USER_SECURITY } from '../components.js';
import { bodySchema, type SchemaObject } from '../convert.js';

const jsonBody = (schema: SchemaObject, required = true): SchemaObject => ({ required, content: { 'application/json': { schema } } });

/** Accounts and authentication (docs/spec.md section 4, Account). */
export function accountPaths(): Record<string, SchemaObject> {
  return {
    '/api/auth/signup': {
      post: {
        operationId: 'signup',
        tags: ['accounts'],
        summary: 'Create an account',
        description: 'Email is trimmed and lower-cased; name, phone and plan are trimmed; an empty phone or plan means none. Throttled per client IP (SIGNUP_LIMIT_PER_HOUR, 10 by default).',
        security: PUBLIC,
        requestBody: jsonBody(bodySchema(validateSignup)),
        responses: { '201': json('The account and a session token', ref('Session')), ...errors(400, 409, 413, 415, 429, 503) },
      },
    },
    '/api/auth/login': {
      post: {
        operationId: 'login',
        tags: ['accounts'],
        summary: 'Get a session token',
        description: 'Same body shape as signup: name, phone and plan are accepted and ignored. A wrong email and a wrong password get the same 401. Throttled per client IP (LOGIN_LIMIT_PER_MINUTE) and per email, existing or not, from any address (LOGIN_FAILURES_PER_ACCOUNT failed logins per LOGIN_ACCOUNT_WINDOW_S): the 429 is the same for an unknown email.',
        security: PUBLIC,
        requestBody: jsonBody(bodySchema(validateLogin)),
        responses: { '200': json('A fresh session token', ref('Session')), ...errors(400, 401, 413, 415, 429, 503) },
      },
    },
    '/api/auth/me': {
      get: {
        operationId: 'getProfile',
        tags: ['accounts'],
        summary: 'The caller\'s profile',
        security: USER_SECURITY,
        responses: { '200': authedJson('The user object', ref('Profile')), ...errors(401, 429, 503) },
      },
    },
    '/api/auth/api-key': {
      post: {
        operationId: 'createApiKey',
        tags: ['accounts'],
        summary: 'Create or rotate the account\'s API key',
        description: 'Returns the raw key once. An existing key stops working at once, on every API process.',
        security: USER_SECURITY,
        responses: { '201': authedJson('The new key, shown only here', ref('NewApiKey')), ...errors(401, 429, 503) },
      },
      delete: {
        operationId: 'revokeApiKey',
        tags: ['accounts'],
        summary: 'Revoke the account\'s API key',
        security: USER_SECURITY,
        responses: { '204': { description: 'Revoked' }, ...errors(401, 404, 429, 503) },
      },
    },
  };
}
