import { createHash, randomBytes } from 'node:crypto';
import { MongoServerError } from 'mongodb';
import { AppError, unauthorized } from '#shared/errors/index.js';
import type { ApiKeyDoc, UserDoc } from '#shared/mongo/index.js';
import type { ApiDeps } from '../../deps.js';
import { findKeyDoc } from '../keys/index.js';
import type { LoginInput, SessionResult, SignupInput, UserView } from './schemas.js';
import { issueSessionToken } from './tokens.js';

function toUserView(user: UserDoc, key: Pick<ApiKeyDoc, 'preview' | 'created_at'> | null): UserView {
  return {
    id: user._id,
    email: user.email,
    name: user.name,
    phone: user.phone,
    plan: user.plan,
    created_at: user.created_at.toISOString(),
    api_key: key ? { preview: key.preview, created_at: key.created_at.toISOString() } : null,
  };
}

export const newUserId = (): string => `usr_${randomBytes(12).toString('hex')}`;

const emailTaken = (): AppError => new AppError('conflict', 'An account with this email already exists');

function isDuplicateKey(err: unknown): boolean {
  return err instanceof MongoServerError && err.code === 11000;
}

export async function signup(deps: ApiDeps, input: SignupInput): Promise<SessionResult> {
  const { users } = deps.mongo.collections;
  try {
    // Cheap early answer; the unique index below is what actually decides a race.
    if (await users.findOne({ email: input.email }, { projection: { _id: 1 } })) throw emailTaken();
    const user: UserDoc = {
      _id: newUserId(),
      email: input.email,
      name: input.name,
      phone: input.phone ?? null,
      plan: input.plan ?? null,
      password: await deps.passwords.hash(input.password),
      created_at: deps.clock(),
    };
    await users.insertOne(user);
    return { token: issueSessionToken(deps.config.auth, user._id, deps.clock()), user: toUserView(user, null) };
  } catch (err) {
    if (isDuplicateKey(err)) throw emailTaken();
    throw err;
  }
}

/**
 * The per-email login budget's subject: a digest, so the rate-limit
 * collection holds no email addresses. The email is already normalised
 * (trimmed, lower-case) by the schema.
 */
function loginAccountSubject(email: string): string {
  return createHash('sha256').update(email).digest('base64url').slice(0, 32);
}

/**
 * Wrong email and wrong password get the same answer after the same work.
 * Every attempt takes a point of the email's failure budget before the
 * password is checked (so a burst from many addresses cannot all get past a
 * read of the counter); a success gives it back. An unknown email has a
 * budget like any other, so the 429 does not tell whether it exists either.
 */
export async function login(deps: ApiDeps, input: LoginInput): Promise<SessionResult> {
  const subject = loginAccountSubject(input.email);
  await deps.limits.loginAccount.consume(subject);
  const user = await deps.mongo.collections.users.findOne({ email: input.email });
  const ok = user ? await deps.passwords.verify(input.password, user.password) : await deps.passwords.verifyAgainstDummy(input.password);
  if (!user || !ok) throw unauthorized('Invalid email or password');
  await deps.limits.loginAccount.refund(subject).catch((err: unknown) => deps.log.warn({ err }, 'could not refund a login attempt'));
  if (deps.passwords.needsUpgrade(user.password)) await upgradeHash(deps, user, input.password);
  const key = await findKeyDoc(deps, user._id);
  return { token: issueSessionToken(deps.config.auth, user._id, deps.clock()), user: toUserView(user, key) };
}

/**
 * Re-hashes a password stored with weaker parameters than the configured
 * ones, now that the plain password is at hand. Conditional on the old hash,
 * so two logins racing write once; a failure only leaves the old hash for
 * the next login.
 */
async function upgradeHash(deps: ApiDeps, user: UserDoc, password: string): Promise<void> {
  try {
    const upgraded = await deps.passwords.hash(password);
    await deps.mongo.collections.users.updateOne({ _id: user._id, 'password.hash': user.password.hash }, { $set: { password: upgraded } });
    deps.log.info({ user_id: user._id, from_n: user.password.N, to_n: upgraded.N }, 'password hash upgraded');
  } catch (err) {
    deps.log.warn({ err, user_id: user._id }, 'could not upgrade a password hash; will try at the next login');
  }
}

/** The user, or null; concurrent lookups of one user share one read (user-reads.ts). */
export function findUser(deps: ApiDeps, userId: string): Promise<UserDoc | null> {
  return deps.userReads.find(userId);
}

/** The caller's profile; the account may have vanished since the token was issued. */
export async function profile(deps: ApiDeps, userId: string): Promise<UserView> {
  const [user, key] = await Promise.all([findUser(deps, userId), findKeyDoc(deps, userId)]);
  if (!user) throw unauthorized('The account of this credential no longer exists');
  return toUserView(user, key);
}
