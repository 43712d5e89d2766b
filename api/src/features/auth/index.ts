/** The auth feature as other features see it (mcp). */
export { profile } from './service.js';
export { UserSchema } from './schemas.js';
