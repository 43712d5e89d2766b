import { KeySummarySchema } from '../keys/index.js';
import { component, DateTime, Nullable, type Static, Type } from '../../shapes.js';
import { bodyValidator } from '../../validation.js';

const email = Type.String({ format: 'email', maxLength: 254 });
const password = Type.String({ minLength: 8, maxLength: 256 });
const name = Type.String({ minLength: 1, maxLength: 200 });
// E.164-ish: an optional +, then digits with the usual separators. `nullable` (ajv's keyword) keeps one error per bad value.
const phone = Type.Unsafe<string | null>({ type: 'string', nullable: true, maxLength: 32, pattern: '^\\+?[0-9][0-9 ().-]{2,31}$' });
const plan = Type.Unsafe<string | null>({ type: 'string', nullable: true, minLength: 1, maxLength: 64 });

export const SignupBody = Type.Object({ email, name, password, phone: Type.Optional(phone), plan: Type.Optional(plan) }, { additionalProperties: false });
export type SignupInput = Static<typeof SignupBody>;

/**
 * "Same body shape as signup" (docs/spec.md): name, phone and plan are allowed
 * and ignored; unknown fields are still refused. No minimum on the password
 * here: a short one simply fails to match.
 */
export const LoginBody = Type.Object(
  {
    email: Type.String({ minLength: 1, maxLength: 254 }),
    password: Type.String({ minLength: 1, maxLength: 256 }),
    name: Type.Optional(Type.Unknown()),
    phone: Type.Optional(Type.Unknown()),
    plan: Type.Optional(Type.Unknown()),
  },
  { additionalProperties: false },
);
export type LoginInput = Pick<Static<typeof LoginBody>, 'email' | 'password'>;

export const validateSignup = bodyValidator<SignupInput>(SignupBody);
export const validateLogin = bodyValidator<LoginInput>(LoginBody);

/** The user object of every response. Never carries a password or key hash. */
export const UserSchema = component(
  'User',
  Type.Object({
    id: Type.String({ description: 'The user id, which is also the account id', examples: ['usr_5f0c6a8e2b1d4c3a9e7f6b5a'] }),
    email: Type.String({ format: 'email' }),
    name: Type.String(),
    phone: Nullable(Type.String()),
    plan: Nullable(Type.String()),
    created_at: DateTime('When the account signed up'),
    api_key: Nullable(KeySummarySchema, { description: 'The current API key (never the key itself), or null when there is none' }),
  }),
);
export type UserView = Static<typeof UserSchema>;

export const SessionSchema = component('Session', Type.Object({ token: Type.String({ description: 'Session JWT (HS256), valid 30 days' }), user: UserSchema }));
export type SessionResult = Static<typeof SessionSchema>;

export const ProfileSchema = component('Profile', Type.Object({ user: UserSchema }));

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
