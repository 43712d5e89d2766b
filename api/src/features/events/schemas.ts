import { EVENT_TYPES, type EventType } from '../../../../shared/src/eventlog/types.js';
import { bodyValidator, queryValidator } from '../../validation.js';

export const LIST_MAX_LIMIT = 500;
export const LIST_DEFAULT_LIMIT = 100;
/** docs/spec.md section 8; LONG_POLL_MAX_MS may lower it, never raise it. */
export const LONG_POLL_CEILING_MS = 55_000;

export interface ListEventsInput {
  type?: EventType;
  since?: string;
  limit?: number;
}

export const listEventsQuery = queryValidator<ListEventsInput>({
  type: 'object',
  additionalProperties: false,
  properties: {
    type: { type: 'string', enum: [...EVENT_TYPES] },
    since: { type: 'string', minLength: 1, maxLength: 64 },
    limit: { type: 'integer', minimum: 1, maximum: LIST_MAX_LIMIT },
  },
});

export interface WaitInput {
  types?: EventType[];
  timeout_ms?: number;
  since?: string;
}

export const waitBody = bodyValidator<WaitInput>({
  type: 'object',
  additionalProperties: false,
  properties: {
    types: { type: 'array', items: { type: 'string', enum: [...EVENT_TYPES] }, maxItems: EVENT_TYPES.length, uniqueItems: true },
    timeout_ms: { type: 'integer', minimum: 0, maximum: LONG_POLL_CEILING_MS },
    since: { type: 'string', minLength: 1, maxLength: 64 },
  },
});
