import { uniqueName } from '#test-support/env.js';
import { call } from './api.js';

export interface TestAccount {
  token: string;
  apiKey: string;
  userId: string;
  email: string;
  password: string;
}

export interface AccountOptions {
  email?: string;
  name?: string;
  password?: string;
  phone?: string;
  plan?: string;
  /** Create the platform API key too (default true). */
  withApiKey?: boolean;
  /** Sent as X-Forwarded-For (only matters for an app with TRUST_PROXY). */
  forwardedFor?: string;
}

/**
 * Signs up a fresh, unique account over HTTP and (by default) creates its
 * API key. Each test should use its own account. `apiKey` is '' when
 * withApiKey is false.
 */
export async function createAccount(baseUrl: string, opts: AccountOptions = {}): Promise<TestAccount> {
  const email = opts.email ?? `${uniqueName('user')}@example.com`;
  const password = opts.password ?? `pw-${uniqueName('secret')}`;
  const body: Record<string, string> = { email, name: opts.name ?? 'Test User', password };
  if (opts.phone !== undefined) body.phone = opts.phone;
  if (opts.plan !== undefined) body.plan = opts.plan;
  const headers: Record<string, string> = opts.forwardedFor ? { 'x-forwarded-for': opts.forwardedFor } : {};
  const signup = await call(baseUrl, 'POST', '/api/auth/signup', { body, headers });
  if (signup.status !== 201) throw new Error(`signup failed: ${signup.status} ${JSON.stringify(signup.body)}`);
  const token: string = signup.body.token;
  let apiKey = '';
  if (opts.withApiKey !== false) {
    const key = await call(baseUrl, 'POST', '/api/auth/api-key', { headers: { authorization: `Bearer ${token}` } });
    if (key.status !== 201) throw new Error(`api key creation failed: ${key.status} ${JSON.stringify(key.body)}`);
    apiKey = key.body.api_key;
  }
  return { token, apiKey, userId: signup.body.user.id, email: signup.body.user.email, password };
}

export const bearer = (credential: string): Record<string, string> => ({ authorization: `Bearer ${credential}` });
