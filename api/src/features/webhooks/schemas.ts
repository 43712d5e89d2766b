import { EVENT_TYPES } from '../../../../shared/src/eventlog/types.js';
import { bodyValidator, queryValidator } from '../../validation.js';

export const MAX_URL_LENGTH = 2048;
export const MAX_DESCRIPTION_LENGTH = 500;
export const MAX_ATTEMPTS_LIMIT = 200;
export const DEFAULT_ATTEMPTS_LIMIT = 50;

/** Subscription ids: `wh_` + 24 hex characters. Anything else cannot exist: 404. */
export const WEBHOOK_ID = /^wh_[0-9a-f]{24}$/;

export interface CreateWebhookInput {
  url: string;
  events: string[];
  description?: string;
}

const webhookFields = {
  url: { type: 'string', minLength: 1, maxLength: MAX_URL_LENGTH },
  events: {
    type: 'array',
    minItems: 1,
    maxItems: EVENT_TYPES.length,
    uniqueItems: true,
    items: { type: 'string', enum: ['*', ...EVENT_TYPES] },
  },
  description: { type: 'string', maxLength: MAX_DESCRIPTION_LENGTH },
};

export const createWebhookBody = bodyValidator<CreateWebhookInput>({
  type: 'object',
  additionalProperties: false,
  required: ['url', 'events'],
  properties: webhookFields,
});

export interface UpdateWebhookInput {
  url?: string;
  events?: string[];
  description?: string;
  enabled?: boolean;
}

/** PATCH: any of the fields, at least one; unknown fields are refused by name. */
export const updateWebhookBody = bodyValidator<UpdateWebhookInput>({
  type: 'object',
  additionalProperties: false,
  minProperties: 1,
  properties: { ...webhookFields, enabled: { type: 'boolean' } },
});

/** Secret rotation: how long the replaced secret keeps signing, in seconds. */
export const DEFAULT_GRACE_PERIOD_S = 24 * 3600;
export const MAX_GRACE_PERIOD_S = 7 * 24 * 3600;

export interface RotateSecretInput {
  grace_period_s: number;
}

/** POST …/secret/rotate: an empty body (or none) takes the default grace period. */
export const rotateSecretBody = bodyValidator<RotateSecretInput>({
  type: 'object',
  additionalProperties: false,
  properties: {
    grace_period_s: { type: 'integer', minimum: 0, maximum: MAX_GRACE_PERIOD_S, default: DEFAULT_GRACE_PERIOD_S },
  },
});

export interface AttemptsQuery {
  limit: number;
}

export const attemptsQuery = queryValidator<AttemptsQuery>({
  type: 'object',
  additionalProperties: false,
  properties: {
    limit: { type: 'integer', minimum: 1, maximum: MAX_ATTEMPTS_LIMIT, default: DEFAULT_ATTEMPTS_LIMIT },
  },
});
