/** The ingest feature as the rest of the API sees it (deps.ts starts its idempotency-key sweeper). */
export { startKeySweeper } from './idempotency.js';
