/** The webhooks feature as other features see it: the services and shapes they reuse (activity, mcp). */
export { checkOpKey, runOnce, startOpKeySweeper } from './op-keys.js';
export { recoverDeliveries, replayEvents, resendDelivery } from './operations.js';
export { attemptView, createWebhook, deleteWebhook, findOwned, listWebhooks, pingWebhook, rotateSecret, updateWebhook, type Attempt } from './service.js';
export {
  CreateWebhookBody,
  MAX_RECOVER_DELIVERIES,
  MAX_REPLAY_EVENTS,
  RecoverBody,
  RecoverResultSchema,
  ReplayBody,
  ReplayResultSchema,
  ResendResultSchema,
  type RecoverInput,
  type ReplayInput,
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
