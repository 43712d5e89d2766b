/**
 * Who is calling: set on `ctx.state.auth` by the `account` guard (middleware/auth.ts).
 * Its own module, so features that take a caller (keys, mcp) and the middleware that
 * finds one import it without importing each other.
 * Account id = user id (one user per account).
 */
export interface AuthContext {
  accountId: string;
  userId: string;
  via: 'session' | 'api_key';
}
