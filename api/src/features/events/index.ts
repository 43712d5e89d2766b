/** The events feature as other features see it (streams, mcp). */
export { listEvents, resolveSince } from './service.js';
export { waitForEvent } from './long-poll.js';
export { EventPageSchema, LIST_DEFAULT_LIMIT, LIST_MAX_LIMIT, ListEventsQuery, WaitBody, WaitResultSchema, type WaitInput } from './schemas.js';
