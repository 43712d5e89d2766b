/** The webhooks feature as other features see it: the services and shapes they reuse (activity, mcp). */
export { attemptView, createWebhook, deleteWebhook, findOwned, listWebhooks, pingWebhook, rotateSecret, updateWebhook, type Attempt } from './service.js';
export {
  CreateWebhookBody,
  DEFAULT_GRACE_PERIOD_S,
  DeliveryAttemptSchema,
  MAX_GRACE_PERIOD_S,
  RotateSecretBody,
  TriggerSchema,
  UpdateWebhookBody,
  WEBHOOK_ID,
  WebhookIdParams,
  WebhookListSchema,
  WebhookPingSchema,
  WebhookSchema,
  WebhookSecretRotationSchema,
  WebhookWithSecretSchema,
  type CreateWebhookInput,
  type RotateSecretInput,
  type UpdateWebhookInput,
} from './schemas.js';
