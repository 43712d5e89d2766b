/**
 * JSON Schemas of the MCP tools: `inputSchema` (validated with ajv before a
 * tool runs) and `outputSchema` (what `structuredContent` conforms to; MCP
 * clients validate it). Only keywords common to draft-07 and 2020-12, so the
 * schemas mean the same under MCP's default dialect and under our ajv.
 */
import { EVENT_TYPES } from '../../../../shared/src/eventlog/types.js';

type JsonSchema = Record<string, unknown>;

export const WAIT_MAX_TIMEOUT_MS = 55_000;
export const WAIT_DEFAULT_TIMEOUT_MS = 30_000;

const noArguments: JsonSchema = { type: 'object', properties: {}, additionalProperties: false };

const cursor = (description: string): JsonSchema => ({ type: 'string', minLength: 1, maxLength: 64, description });

const eventType: JsonSchema = { type: 'string', enum: [...EVENT_TYPES] };

export const inputSchemas = {
  wait_for_event: {
    type: 'object',
    properties: {
      types: {
        type: 'array',
        items: eventType,
        minItems: 1,
        uniqueItems: true,
        description: 'Only wait for events of these types. Omit to wait for any type.',
      },
      timeout_ms: {
        type: 'integer',
        minimum: 1,
        maximum: WAIT_MAX_TIMEOUT_MS,
        default: WAIT_DEFAULT_TIMEOUT_MS,
        description: `How long to wait, in milliseconds (at most ${WAIT_MAX_TIMEOUT_MS}, default ${WAIT_DEFAULT_TIMEOUT_MS}).`,
      },
      since: cursor('Cursor of the last event you handled (the `cursor` of a previous result). Returns the first matching event after it, including events that arrived between your calls. Omit to wait only for events that happen from now on.'),
    },
    additionalProperties: false,
  },
  list_events: {
    type: 'object',
    properties: {
      type: { ...eventType, description: 'Only events of this type.' },
      since: cursor('Return events strictly after this cursor (the `cursor` of a previous list_events result). Omit to start from the oldest event.'),
      limit: { type: 'integer', minimum: 1, maximum: 100, description: 'Maximum number of events to return (1-100).' },
    },
    additionalProperties: false,
  },
  list_webhooks: noArguments,
  create_webhook: {
    type: 'object',
    properties: {
      url: { type: 'string', minLength: 1, maxLength: 2048, description: 'HTTPS URL on the public internet that receives signed POSTs.' },
      events: {
        type: 'array',
        items: { type: 'string', enum: [...EVENT_TYPES, '*'] },
        minItems: 1,
        uniqueItems: true,
        description: 'Event types to deliver, or ["*"] for all.',
      },
      description: { type: 'string', maxLength: 500, description: 'Free text to recognise the subscription by.' },
    },
    required: ['url', 'events'],
    additionalProperties: false,
  },
  delete_webhook: {
    type: 'object',
    properties: { id: { type: 'string', minLength: 1, maxLength: 64, description: 'The subscription id.' } },
    required: ['id'],
    additionalProperties: false,
  },
  ping_webhook: {
    type: 'object',
    properties: { id: { type: 'string', minLength: 1, maxLength: 64, description: 'The subscription id.' } },
    required: ['id'],
    additionalProperties: false,
  },
  whoami: noArguments,
} satisfies Record<string, JsonSchema>;

export type ToolName = keyof typeof inputSchemas;

const eventRecord: JsonSchema = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    type: { type: 'string' },
    created_at: { type: 'string' },
    data: { type: 'object' },
    cursor: { type: 'string' },
  },
  required: ['id', 'type', 'created_at', 'data', 'cursor'],
};

const webhook: JsonSchema = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    url: { type: 'string' },
    events: { type: 'array', items: { type: 'string' } },
    description: { type: 'string' },
  },
  required: ['id', 'url', 'events'],
};

export const outputSchemas: Record<ToolName, JsonSchema> = {
  wait_for_event: {
    type: 'object',
    properties: {
      event: { anyOf: [eventRecord, { type: 'null' }] },
      timed_out: { type: 'boolean' },
    },
    required: ['event'],
  },
  list_events: {
    type: 'object',
    properties: {
      events: { type: 'array', items: eventRecord },
      cursor: { anyOf: [{ type: 'string' }, { type: 'null' }] },
    },
    required: ['events', 'cursor'],
  },
  list_webhooks: {
    type: 'object',
    properties: { webhooks: { type: 'array', items: webhook } },
    required: ['webhooks'],
  },
  create_webhook: webhook,
  delete_webhook: {
    type: 'object',
    properties: { id: { type: 'string' }, deleted: { type: 'boolean' } },
    required: ['id', 'deleted'],
  },
  ping_webhook: { type: 'object' },
  whoami: {
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
  },
};
