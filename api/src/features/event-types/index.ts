/** The event-type catalog as other features see it: the list and its shape, for the MCP tool. */
export { EVENT_TYPE_LIST, EventTypeListSchema } from './schemas.js';
