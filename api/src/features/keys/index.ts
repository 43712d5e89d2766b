/** The keys feature as the rest of the API sees it: auth, mcp, middleware/auth.ts (API-key resolution and rate). */
export { consumeApiKeyRate, findKeyDoc, looksLikeApiKey, resolveApiKey } from './service.js';
export { KeySummarySchema } from './schemas.js';
export { KeyCache } from './cache.js';
