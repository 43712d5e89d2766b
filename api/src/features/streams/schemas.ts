import { validationFailed } from '../../../../shared/src/errors/index.js';
import { isEventType, type EventType } from '../../../../shared/src/eventlog/types.js';
import { queryValidator } from '../../validation.js';

export interface StreamQuery {
  token: string;
  /** Comma-separated event types. */
  types?: string;
  since?: string;
}

export const streamQuery = queryValidator<StreamQuery>({
  type: 'object',
  additionalProperties: false,
  required: ['token'],
  properties: {
    token: { type: 'string' },
    types: { type: 'string', maxLength: 400 },
    since: { type: 'string', minLength: 1, maxLength: 64 },
  },
});

export function parseTypes(raw: string | undefined): EventType[] | null {
  if (raw === undefined || raw.trim() === '') return null;
  const types = [...new Set(raw.split(',').map((t) => t.trim()).filter(Boolean))];
  const unknown = types.filter((t) => !isEventType(t));
  if (unknown.length > 0) throw validationFailed([{ path: 'types', message: `unknown event type ${unknown.map((t) => JSON.stringify(t.slice(0, 40))).join(', ')}` }]);
  return types as EventType[];
}
