/** The keys feature as other features see it (auth, mcp). */
export { consumeApiKeyRate, findKeyDoc, looksLikeApiKey } from './service.js';
export { KeySummarySchema } from './schemas.js';
