/** The activity feature as other features see it: the reads and shapes the MCP tools reuse. */
export { eventDeliveries, webhookStats } from './service.js';
export { searchDeliveries } from './search.js';
export { DeliverySearchQuery, DeliverySearchSchema, EventDeliveriesSchema, SEARCH_DEFAULT_LIMIT, SEARCH_MAX_LIMIT, SEARCH_MAX_SCAN, StatsQuery, WebhookStatsSchema, type StatsWindow } from './schemas.js';
