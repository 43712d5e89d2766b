import { bodyValidator } from '../../validation.js';

export interface SignupInput {
  email: string;
  name: string;
  password: string;
  phone?: string | null;
  plan?: string | null;
}

export interface LoginInput {
  email: string;
  password: string;
}

const email = { type: 'string', format: 'email', maxLength: 254 } as const;
const password = { type: 'string', minLength: 8, maxLength: 256 } as const;
const name = { type: 'string', minLength: 1, maxLength: 200 } as const;
// E.164-ish: an optional +, then digits with the usual separators.
const phone = { type: 'string', nullable: true, maxLength: 32, pattern: '^\\+?[0-9][0-9 ().-]{2,31}$' } as const;
const plan = { type: 'string', nullable: true, minLength: 1, maxLength: 64 } as const;

export const validateSignup = bodyValidator<SignupInput>({
  type: 'object',
  additionalProperties: false,
  required: ['email', 'name', 'password'],
  properties: { email, name, password, phone, plan },
});

/**
 * "Same body shape as signup" (docs/spec.md): name, phone and plan are allowed
 * and ignored; unknown fields are still refused. No minimum on the password
 * here: a short one simply fails to match.
 */
export const validateLogin = bodyValidator<LoginInput>({
  type: 'object',
  additionalProperties: false,
  required: ['email', 'password'],
  properties: {
    email: { type: 'string', minLength: 1, maxLength: 254 },
    password: { type: 'string', minLength: 1, maxLength: 256 },
    name: {},
    phone: {},
    plan: {},
  },
});

/**
 * Trims the fields where surrounding spaces are never meant, and lower-cases
 * the email, before validation: " Ann@Example.com " is ann@example.com.
 * Passwords are taken exactly as sent.
 */
export function normalizeAccountBody(body: unknown): unknown {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return body;
  const out: Record<string, unknown> = { ...(body as Record<string, unknown>) };
  for (const field of ['email', 'name', 'phone', 'plan']) {
    const value = out[field];
    if (typeof value === 'string') out[field] = value.trim();
  }
  if (typeof out.email === 'string') out.email = out.email.toLowerCase();
  // Forms send optional fields left empty as "": that means "not given".
  for (const field of ['phone', 'plan']) if (out[field] === '') out[field] = null;
  return out;
}
