/** The limits feature as the rest of the API sees it: auth, keys, streams, mcp, middleware/auth.ts, and deps.ts (which builds the limiters). */
export { ipRateSubject } from './client-ip.js';
export { createRateLimits, flushRateLimits, setRateHeaders, type RateLimits, type RateState } from './limiter.js';
export { startWindowSweeper } from './window-store.js';
