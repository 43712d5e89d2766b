/**
 * The event-type catalog: for each type of the log, what it means and the
 * JSON Schema of its `data`. Written once here; the route, the OpenAPI
 * document (each data shape is a named component) and the MCP tool all read it.
 *
 * A data shape describes the fields the platform's producers send for that
 * type. It requires none and allows others: ingest stores `data` as the
 * producer sent it (a JSON object within the size and depth limits) and does
 * not check it against these shapes (docs/decisions.md). The operational
 * types (webhook.disabled, webhook.delivery_exhausted) are written by the
 * service alone, so their shapes list every field as present.
 */
import { createHash } from 'node:crypto';
import { EVENT_TYPES, type EventType } from '#shared/eventlog/types.js';
import { AnyObject, component, EventTypeSchema, plainJson, type Static, type TSchema, Type } from '../../shapes.js';

const NOTE = 'Fields the producers send; none is required and others may appear (ingest does not check `data` against this schema).';

const callId = Type.String({ description: 'The call, the same on every event of one call', examples: ['call_7f3a9c21'] });
const messageId = Type.String({ description: 'The message', examples: ['msg_51c0e8aa'] });
const phone = (description: string) => Type.String({ description: `${description}, E.164`, examples: ['+15550100'] });
const channel = Type.String({ description: '`sms` or `whatsapp`', examples: ['sms'] });

const dataShape = (name: string, properties: Parameters<typeof Type.Object>[0], example: Record<string, unknown>): TSchema =>
  component(name, Type.Object(properties, { description: NOTE, examples: [example] }));

const opt = Type.Optional;

const SUB = 'wh_5f0c2a9d41be7730c8e2a61f';
const SERVICE_NOTE = 'Written by the service itself; every field is always present.';

/** Each type: when it is fired (docs/spec.md section 6) and the shape of its data. */
const CATALOG: Record<EventType, { description: string; data: TSchema }> = {
  'call.started': {
    description: 'A call (inbound or outbound) connects.',
    data: dataShape(
      'CallStartedData',
      { call_id: opt(callId), direction: opt(Type.String({ description: '`inbound` or `outbound`', examples: ['inbound'] })), from: opt(phone('The calling number')), to: opt(phone('The called number')) },
      { call_id: 'call_7f3a9c21', direction: 'inbound', from: '+15550100', to: '+15550199' },
    ),
  },
  'call.ended': {
    description: 'The call hangs up.',
    data: dataShape(
      'CallEndedData',
      { call_id: opt(callId), duration_s: opt(Type.Number({ minimum: 0, description: 'How long the call lasted, in seconds' })), hangup_by: opt(Type.String({ description: 'Who hung up, e.g. `caller`', examples: ['caller'] })) },
      { call_id: 'call_7f3a9c21', duration_s: 42, hangup_by: 'caller' },
    ),
  },
  'call.transcribed': {
    description: 'The final transcript of a call is ready.',
    data: dataShape('CallTranscribedData', { call_id: opt(callId), transcript: opt(Type.String({ description: 'The final transcript' })) }, { call_id: 'call_7f3a9c21', transcript: 'Hello, I would like to book a table.' }),
  },
  'call.completed': {
    description: 'The post-call insights (summary, sentiment) are ready.',
    data: dataShape(
      'CallCompletedData',
      { call_id: opt(callId), summary: opt(Type.String({ description: 'A summary of the call' })), sentiment: opt(Type.String({ description: 'The caller\'s sentiment, e.g. `positive`, `neutral`, `negative`', examples: ['positive'] })) },
      { call_id: 'call_7f3a9c21', summary: 'Booked a table for two.', sentiment: 'positive' },
    ),
  },
  'call.takeover': {
    description: 'A human takes over a live call.',
    data: dataShape('CallTakeoverData', { call_id: opt(callId), agent: opt(Type.String({ description: 'Who took the call over', examples: ['alex@example.com'] })) }, { call_id: 'call_7f3a9c21', agent: 'alex@example.com' }),
  },
  'message.received': {
    description: "An inbound SMS or WhatsApp message arrives on the account's number.",
    data: dataShape(
      'MessageReceivedData',
      { message_id: opt(messageId), channel: opt(channel), from: opt(phone('The sender')), text: opt(Type.String({ description: 'The message text' })) },
      { message_id: 'msg_51c0e8aa', channel: 'sms', from: '+15550100', text: 'Hello' },
    ),
  },
  'message.sent': {
    description: 'An outbound message is accepted.',
    data: dataShape(
      'MessageSentData',
      { message_id: opt(messageId), channel: opt(channel), to: opt(phone('The recipient')), text: opt(Type.String({ description: 'The message text' })) },
      { message_id: 'msg_51c0e8aa', channel: 'whatsapp', to: '+15550100', text: 'See you at eight' },
    ),
  },
  'webhook.ping': {
    description: 'A test ping fired at one subscription by POST /api/v1/webhooks/{id}/ping; delivered to that subscription only, and readable on every read path.',
    data: dataShape('WebhookPingData', { subscription_id: opt(Type.String({ description: 'The subscription pinged (set by the ping operation)', examples: ['wh_5f0c2a9d41be7730c8e2a61f'] })) }, { subscription_id: 'wh_5f0c2a9d41be7730c8e2a61f' }),
  },
  'webhook.disabled': {
    description:
      'A subscription was disabled because every attempt to it failed for WEBHOOK_DISABLE_AFTER. Written by the service (ingest refuses it), only for an account one of whose subscriptions lists this type by name; delivered only to subscriptions listing it by name ("*" does not match it), never to the one disabled.',
    data: component(
      'WebhookDisabledData',
      Type.Object(
        {
          subscription_id: Type.String({ description: 'The subscription disabled', examples: [SUB] }),
          url: Type.Union([Type.String(), Type.Null()], { description: "Its URL's origin (scheme, host, port): the path and query are left out, as they may carry the receiver's own secret", examples: ['https://example.com'] }),
          reason: Type.Literal('endpoint_failing', { description: 'Why: `endpoint_failing` (every attempt failed for the disabling period)' }),
          failing_since: Type.String({ format: 'date-time', description: 'The first failure after its last success' }),
          disabled_at: Type.String({ format: 'date-time', description: 'When it was disabled' }),
        },
        { description: SERVICE_NOTE, examples: [{ subscription_id: SUB, url: 'https://example.com', reason: 'endpoint_failing', failing_since: '2025-01-01T10:00:00.000Z', disabled_at: '2025-01-06T10:00:04.000Z' }] },
      ),
    ),
  },
  'webhook.delivery_exhausted': {
    description:
      'A delivery was given up for good: its retries ran out, or its receiver answered with a permanent failure (410). Written by the service (ingest refuses it), only for an account one of whose subscriptions lists this type by name; delivered only to subscriptions listing it by name ("*" does not match it), never to the one whose delivery failed.',
    data: component(
      'WebhookDeliveryExhaustedData',
      Type.Object(
        {
          subscription_id: Type.String({ description: 'The subscription the delivery was for', examples: [SUB] }),
          url: Type.Union([Type.String(), Type.Null()], { description: "Its URL's origin (scheme, host, port; the path and query may carry the receiver's own secret), null if it was deleted meanwhile" }),
          delivery_id: Type.String({ description: 'The delivery given up (X-Service-Delivery); recover or resend queues it again' }),
          event_id: Type.String({ description: 'The event it carried' }),
          event_type: Type.String({ description: 'That event\'s type' }),
          reason: Type.Union([Type.Literal('retries_exhausted'), Type.Literal('permanent_failure')], { description: '`retries_exhausted` or `permanent_failure`' }),
          attempts: Type.Integer({ minimum: 1, description: 'Attempts made' }),
          last_outcome: Type.String({ description: 'The last attempt\'s outcome (as on the attempt records)', examples: ['http_4xx'] }),
          last_status: Type.Union([Type.Integer(), Type.Null()], { description: 'The last attempt\'s HTTP status (null when none came back)' }),
          last_attempt_at: Type.String({ format: 'date-time', description: 'When the last attempt was made' }),
        },
        {
          description: SERVICE_NOTE,
          examples: [{ subscription_id: SUB, url: 'https://example.com', delivery_id: 'dlv_3c1f0a9e2b7d4c6a8e0f1b2d', event_id: 'evt_8a41c2f07e3b95d16a0c4e27', event_type: 'call.ended', reason: 'permanent_failure', attempts: 1, last_outcome: 'http_4xx', last_status: 410, last_attempt_at: '2025-01-01T10:00:00.000Z' }],
        },
      ),
    ),
  },
};

/** The data shapes, for the OpenAPI document's components. */
export const EVENT_DATA_SCHEMAS: TSchema[] = EVENT_TYPES.map((type) => CATALOG[type].data);

export const EventTypeListSchema = component(
  'EventTypeList',
  Type.Object({
    event_types: Type.Array(
      Type.Object({
        type: EventTypeSchema,
        description: Type.String({ description: 'When an event of this type is fired' }),
        data_schema: AnyObject('JSON Schema (2020-12) of the event\'s `data`: the fields producers send (none required, others allowed), or for the types the service writes itself, the fields it always writes'),
      }),
      { description: 'Every event type, in the order of the contract' },
    ),
  }),
);
type EventTypeList = Static<typeof EventTypeListSchema>;

const JSON_SCHEMA_DIALECT = 'https://json-schema.org/draft/2020-12/schema';

/** The catalog as every caller receives it: built once, the same on every API process of one version. */
export const EVENT_TYPE_LIST: EventTypeList = {
  event_types: EVENT_TYPES.map((type) => ({
    type,
    description: CATALOG[type].description,
    data_schema: { $schema: JSON_SCHEMA_DIALECT, ...plainJson(CATALOG[type].data) },
  })),
};

/** The catalog as the route sends it, and its entity tag (a hash of those bytes: equal across processes serving the same catalog). */
export const EVENT_TYPE_LIST_JSON = JSON.stringify(EVENT_TYPE_LIST);
export const EVENT_TYPE_LIST_ETAG = `"${createHash('sha256').update(EVENT_TYPE_LIST_JSON).digest('base64url').slice(0, 27)}"`;
