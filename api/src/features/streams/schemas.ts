import { validationFailed } from '#shared/errors/index.js';
import { isEventType, type EventType } from '#shared/eventlog/types.js';
import { component, DateTime, type Static, Type } from '../../shapes.js';
import { queryValidator } from '../../validation.js';

export const StreamQuerySchema = Type.Object(
  {
    token: Type.String({ description: 'A `svcst_` stream token (API keys are refused here)' }),
    types: Type.Optional(Type.String({ maxLength: 400, description: 'Comma-separated event types to receive (default: all)' })),
    since: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'Start after this cursor' })),
  },
  { additionalProperties: false },
);
type StreamQuery = Static<typeof StreamQuerySchema>;
export const streamQuery = queryValidator<StreamQuery>(StreamQuerySchema);

export const StreamTokenSchema = component(
  'StreamToken',
  Type.Object({
    token: Type.String({ pattern: '^svcst_', description: 'Valid only as the `token` query parameter of the stream URL' }),
    expires_at: DateTime('When the token stops opening streams (a stream already open runs on)'),
    stream_url: Type.String({
      description: "The stream URL with this token, ready for EventSource: relative (`/api/v1/events/stream?token=…`) unless the server has PUBLIC_BASE_URL; never taken from the request's Host",
    }),
  }),
);

export function parseTypes(raw: string | undefined): EventType[] | null {
  if (raw === undefined || raw.trim() === '') return null;
  const types = [...new Set(raw.split(',').map((t) => t.trim()).filter(Boolean))];
  const unknown = types.filter((t) => !isEventType(t));
  if (unknown.length > 0) throw validationFailed([{ path: 'types', message: `unknown event type ${unknown.map((t) => JSON.stringify(t.slice(0, 40))).join(', ')}` }]);
  return types as EventType[];
}
