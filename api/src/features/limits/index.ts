/** The limits feature as other features see it (auth, keys, streams, mcp). */
export { ipRateSubject } from './client-ip.js';
export { setRateHeaders, type RateState } from './limiter.js';
