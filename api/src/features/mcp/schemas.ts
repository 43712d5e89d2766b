/**
 * JSON Schemas of the MCP tools. Each `inputSchema` is the owning feature's
 * own request schema (the one its HTTP route validates with) plus a
 * description per field for the model, so the rules live in one place.
 * `outputSchema` describes `structuredContent`; MCP clients validate it.
 * Only keywords common to draft-07 and 2020-12 (MCP's default dialect).
 */
import type { Schema } from 'ajv';
import type { ApiConfig } from '../../config.js';
import { LIST_DEFAULT_LIMIT, LIST_MAX_LIMIT, listEventsQuery, waitBody } from '../events/schemas.js';
import { createWebhookBody, DEFAULT_GRACE_PERIOD_S, MAX_GRACE_PERIOD_S, rotateSecretBody, updateWebhookBody } from '../webhooks/schemas.js';

export type JsonSchema = Record<string, unknown>;

/** A feature's schema with descriptions added; naming a field the schema lacks is a bug caught at startup. */
export function described(schema: Schema, descriptions: Record<string, string>): JsonSchema {
  const base = schema as { properties?: Record<string, JsonSchema> };
  const properties = { ...base.properties };
  for (const [field, description] of Object.entries(descriptions)) {
    const property = properties[field];
    if (!property) throw new Error(`schema has no property "${field}" to describe`);
    properties[field] = { ...property, description };
  }
  return { ...(schema as JsonSchema), properties };
}

export const noArguments: JsonSchema = { type: 'object', properties: {}, additionalProperties: false };

export function waitForEventInput(config: ApiConfig): JsonSchema {
  const { longPollMaxMs, longPollDefaultMs } = config.events;
  return described(waitBody.schema, {
    types: 'Only return events of these types. Omit (or pass []) for any type.',
    timeout_ms: `How long to wait, in milliseconds: at most ${longPollMaxMs}, default ${longPollDefaultMs}.`,
    since:
      'The `cursor` of the last event you handled (or of a timed-out result). The first matching event after it is returned, including one that arrived between your calls. Omit to wait only for events that happen from now on.',
  });
}

export const listEventsInput: JsonSchema = described(listEventsQuery.schema, {
  type: 'Only events of this type.',
  since: 'Return events strictly after this cursor (the `cursor` of a previous result). Omit to start from the oldest event.',
  limit: `Most events to return, 1 to ${LIST_MAX_LIMIT} (default ${LIST_DEFAULT_LIMIT}).`,
});

export const createWebhookInput: JsonSchema = described(createWebhookBody.schema, {
  url: 'HTTPS URL on the public internet that will receive a signed POST per event. Private, loopback and internal addresses are refused.',
  events: 'Event types to deliver, or ["*"] for every type.',
  description: 'Free text to recognise the subscription by.',
});

export const webhookIdInput: JsonSchema = {
  type: 'object',
  properties: { id: { type: 'string', minLength: 1, maxLength: 64, description: 'The subscription id (wh_…).' } },
  required: ['id'],
  additionalProperties: false,
};

/** PATCH's own body schema plus the id: at least one field besides it. */
export const updateWebhookInput: JsonSchema = (() => {
  const body = described(updateWebhookBody.schema, {
    url: 'New HTTPS URL on the public internet (checked as at creation: private, loopback and internal addresses are refused).',
    events: 'New list of event types to deliver, or ["*"] for every type.',
    description: 'New free text to recognise the subscription by.',
    enabled: 'false stops every delivery to it (queued and retrying ones are given up, not sent later); true resumes with the events that occur from then on.',
  });
  return {
    ...body,
    properties: { id: (webhookIdInput.properties as Record<string, JsonSchema>).id, ...(body.properties as Record<string, JsonSchema>) },
    required: ['id'],
    minProperties: 2,
  };
})();

/** The rotation's own body schema plus the id. */
export const rotateWebhookSecretInput: JsonSchema = (() => {
  const body = described(rotateSecretBody.schema, {
    grace_period_s: `Seconds during which deliveries are also signed with the old secret, so the receiver can switch without rejecting any: 0 (the old secret stops at once) to ${MAX_GRACE_PERIOD_S} (7 days), default ${DEFAULT_GRACE_PERIOD_S} (24 h).`,
  });
  return { ...body, properties: { id: (webhookIdInput.properties as Record<string, JsonSchema>).id, ...(body.properties as Record<string, JsonSchema>) }, required: ['id'] };
})();

const nullable = (schema: JsonSchema): JsonSchema => ({ anyOf: [schema, { type: 'null' }] });

export const rotatedSecretOutput: JsonSchema = {
  type: 'object',
  properties: { secret: { type: 'string' }, previous_secret_expires_at: nullable({ type: 'string' }) },
  required: ['secret', 'previous_secret_expires_at'],
};

const eventRecord: JsonSchema = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    type: { type: 'string' },
    created_at: { type: 'string' },
    occurred_at: { type: 'string' },
    data: { type: 'object' },
    data_unavailable: { const: true, description: 'Only on an event the store refused: its data is not served.' },
    cursor: { type: 'string' },
  },
  required: ['id', 'type', 'created_at', 'data', 'cursor'],
};

export const waitForEventOutput: JsonSchema = {
  type: 'object',
  properties: {
    event: nullable(eventRecord),
    timed_out: { type: 'boolean' },
    cursor: nullable({ type: 'string' }),
  },
  required: ['event'],
};

export const listEventsOutput: JsonSchema = {
  type: 'object',
  properties: { events: { type: 'array', items: eventRecord }, cursor: nullable({ type: 'string' }) },
  required: ['events', 'cursor'],
};

export const webhookOutput: JsonSchema = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    url: { type: 'string' },
    events: { type: 'array', items: { type: 'string' } },
    description: { type: 'string' },
    enabled: { type: 'boolean' },
    created_at: { type: 'string' },
    last_status: nullable({ type: 'integer' }),
    last_delivery_at: nullable({ type: 'string' }),
    last_error: nullable({ type: 'string' }),
  },
  required: ['id', 'url', 'events'],
};

export const createdWebhookOutput: JsonSchema = {
  ...webhookOutput,
  properties: { ...(webhookOutput.properties as JsonSchema), secret: { type: 'string' } },
  required: ['id', 'url', 'events', 'secret'],
};

export const pingOutput: JsonSchema = {
  type: 'object',
  properties: { event_id: { type: 'string' } },
  required: ['event_id'],
};

export const listWebhooksOutput: JsonSchema = {
  type: 'object',
  properties: { webhooks: { type: 'array', items: webhookOutput } },
  required: ['webhooks'],
};

export const deletedOutput: JsonSchema = {
  type: 'object',
  properties: { id: { type: 'string' }, deleted: { type: 'boolean' } },
  required: ['id', 'deleted'],
};

export const whoamiOutput: JsonSchema = {
  type: 'object',
  properties: {
    account_id: { type: 'string' },
    user: {
      type: 'object',
      properties: { id: { type: 'string' }, email: { type: 'string' }, name: { type: 'string' } },
      required: ['id', 'email', 'name'],
    },
  },
  required: ['account_id', 'user'],
};
