/** The auth feature as the rest of the API sees it: mcp (profile), middleware/auth.ts (session tokens, account lookup). */
export { findUser, profile } from './service.js';
export { UserSchema } from './schemas.js';
export { verifySessionToken } from './tokens.js';
export { PasswordHasher, SCRYPT_PARAMS } from './passwords.js';
export { UserReads } from './user-reads.js';
