/** The streams feature as the rest of the API sees it (deps.ts builds its runtime: stream slots, token key). */
export { createStreamsRuntime, type StreamsRuntime } from './runtime.js';
