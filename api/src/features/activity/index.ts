/** The activity feature as other features see it: the reads and shapes the MCP tools reuse. */
export { eventDeliveries, webhookStats } from './service.js';
export { EventDeliveriesSchema, StatsQuery, WebhookStatsSchema, type StatsWindow } from './schemas.js';
