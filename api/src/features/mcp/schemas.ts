/**
 * JSON Schemas of the MCP tools, derived from the shapes the HTTP routes use
 * (api/src/shapes.ts and each feature's schemas.ts): each `inputSchema` is the
 * owning route's own request shape plus a description per field for the
 * model; each `outputSchema` is the very response shape of the matching route
 * (a webhook is the same fields on both). Handed to clients as plain JSON
 * (no `$ref`s). MCP clients validate `structuredContent` against outputSchema.
 */
import type { ApiConfig } from '../../config.js';
import { described, plainJson, type TSchema, Type } from '../../shapes.js';
import { DeliverySearchQuery, DeliverySearchSchema, EventDeliveriesSchema, SEARCH_DEFAULT_LIMIT, SEARCH_MAX_LIMIT, SEARCH_MAX_SCAN, StatsQuery, WebhookStatsSchema } from '../activity/index.js';
import { UserSchema } from '../auth/index.js';
import { EventTypeListSchema } from '../event-types/index.js';
import { EventPageSchema, LIST_DEFAULT_LIMIT, LIST_MAX_LIMIT, ListEventsQuery, WaitBody, WaitResultSchema } from '../events/index.js';
import {
  CreateWebhookBody,
  MAX_RECOVER_DELIVERIES,
  RecoverBody,
  RecoverResultSchema,
  ReplayBody,
  ReplayResultSchema,
  ResendResultSchema,
  DEFAULT_GRACE_PERIOD_S,
  MAX_GRACE_PERIOD_S,
  RotateSecretBody,
  UpdateWebhookBody,
  WebhookListSchema,
  WebhookPingSchema,
  WebhookSchema,
  WebhookSecretRotationSchema,
  WebhookWithSecretSchema,
} from '../webhooks/index.js';

export type JsonSchema = Record<string, unknown>;

/** A tool's schema as JSON; MCP wants an object schema at the top (a union of objects gets `type: object` beside it). */
const asTool = (schema: TSchema): JsonSchema => ({ type: 'object', ...plainJson(schema) });

export const noArguments: JsonSchema = asTool(Type.Object({}, { additionalProperties: false }));

export function waitForEventInput(config: ApiConfig): JsonSchema {
  const { longPollMaxMs, longPollDefaultMs } = config.events;
  return asTool(
    described(WaitBody, {
      types: 'Only return events of these types. Omit (or pass []) for any type.',
      timeout_ms: `How long to wait, in milliseconds: at most ${longPollMaxMs}, default ${longPollDefaultMs}.`,
      since:
        'The `cursor` of the last event you handled (or of a timed-out result). The first matching event after it is returned, including one that arrived between your calls. Omit to wait only for events that happen from now on.',
    }),
  );
}

export const listEventsInput: JsonSchema = asTool(
  described(ListEventsQuery, {
    type: 'Only events of this type.',
    since: 'Return events strictly after this cursor (the `cursor` of a previous result). Omit to start from the oldest event.',
    limit: `Most events to return, 1 to ${LIST_MAX_LIMIT} (default ${LIST_DEFAULT_LIMIT}).`,
  }),
);

export const createWebhookInput: JsonSchema = asTool(
  described(CreateWebhookBody, {
    url: 'HTTPS URL on the public internet that will receive a signed POST per event. Private, loopback and internal addresses are refused.',
    events: 'Event types to deliver, or ["*"] for every type.',
    description: 'Free text to recognise the subscription by.',
    rate_limit: 'At most this many deliveries per second to this URL (1 to 10000); omit or null for no limit. Deliveries over it wait, in order.',
    ordering: '"fifo": deliveries go one at a time in the order of the log, and a failing one holds the ones after it until it succeeds or is given up (for receivers that must see events in order). "unordered" (the default): concurrent, each retried on its own.',
    headers: 'Custom headers sent with every delivery, e.g. {"X-Api-Key": "…"} (at most 20). Stored encrypted and shown back masked as "****". Headers the service sets itself (X-Service-*, webhook-*, content-type, user-agent, content-length, host) and hop-by-hop ones are refused.',
  }),
);

/** The `{id}` of the subscription routes, as a tool argument: like the route, any string, and an id that does not exist (or is malformed) is not found. */
const idArgument = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64, description: 'The subscription id (wh_…).' }) }, { additionalProperties: false });

export const webhookIdInput: JsonSchema = asTool(idArgument);

/** PATCH's own body shape plus the id: at least one field besides it. */
export const updateWebhookInput: JsonSchema = asTool(
  Type.Object(
    {
      ...idArgument.properties,
      ...described(UpdateWebhookBody, {
        url: 'New HTTPS URL on the public internet (checked as at creation: private, loopback and internal addresses are refused).',
        events: 'New list of event types to deliver, or ["*"] for every type.',
        description: 'New free text to recognise the subscription by.',
        enabled: 'false stops every delivery to it (queued and retrying ones are given up, not sent later); true resumes with the events that occur from then on (also after the delivery process disabled it because every attempt failed for days).',
        rate_limit: 'New limit in deliveries per second (1 to 10000), or null for no limit.',
        ordering: '"fifo" (one at a time in log order, a failing delivery holding the rest) or "unordered". Applies to events that occur after the call returns.',
        headers: 'New custom headers: replaces the whole set ({} removes them all). Applies to every delivery sent after the call returns, retries included.',
      }).properties,
    },
    { additionalProperties: false, minProperties: 2 },
  ),
);

/** The rotation's own body shape plus the id. */
export const rotateWebhookSecretInput: JsonSchema = asTool(
  Type.Object(
    {
      ...idArgument.properties,
      ...described(RotateSecretBody, {
        grace_period_s: `Seconds during which deliveries are also signed with the old secret, so the receiver can switch without rejecting any: 0 (the old secret stops at once) to ${MAX_GRACE_PERIOD_S} (7 days), default ${DEFAULT_GRACE_PERIOD_S} (24 h).`,
      }).properties,
    },
    { additionalProperties: false },
  ),
);

export const rotatedSecretOutput: JsonSchema = asTool(WebhookSecretRotationSchema);

/** The stats query plus the subscription id. */
export const webhookStatsInput: JsonSchema = asTool(
  Type.Object(
    {
      ...idArgument.properties,
      ...described(StatsQuery, { window: '`1h` (the last hour in 12 buckets of 5 minutes, the default) or `24h` (the last day in 24 buckets of an hour).' }).properties,
    },
    { additionalProperties: false },
  ),
);
export const webhookStatsOutput: JsonSchema = asTool(WebhookStatsSchema);

export const eventDeliveriesInput: JsonSchema = asTool(
  Type.Object({ event_id: Type.String({ minLength: 1, maxLength: 64, description: 'The event id (evt_…), as list_events or wait_for_event returned it.' }) }, { additionalProperties: false }),
);
export const eventDeliveriesOutput: JsonSchema = asTool(EventDeliveriesSchema);

export const searchDeliveriesInput: JsonSchema = asTool(
  described(DeliverySearchQuery, {
    outcome: 'Only attempts with one of these outcomes, comma-separated: ok, timeout, dns, connect, tls, http_3xx, http_4xx, http_5xx, blocked_address, or `failed` for every outcome but ok.',
    status: 'Only attempts that got an HTTP status in this range: `404`, a class such as `5xx`, or an inclusive range such as `400-429`. Attempts with no status (timeout, connection failure) never match.',
    event_type: 'Only attempts for events of these types, comma-separated (e.g. `call.completed,message.received`).',
    webhook_id: 'Only the attempts to this subscription (wh_…, as list_webhooks returns it).',
    from: 'ISO 8601 time: only attempts made at or after it.',
    to: 'ISO 8601 time: only attempts made before it.',
    limit: `Most attempts to return, 1 to ${SEARCH_MAX_LIMIT} (default ${SEARCH_DEFAULT_LIMIT}).`,
    cursor: `The next_cursor of the previous result, with the same filters, to read further back. A result examines at most ${SEARCH_MAX_SCAN} stored attempts, so it can hold few or no attempts and still have a next_cursor.`,
  }),
);
export const searchDeliveriesOutput: JsonSchema = asTool(DeliverySearchSchema);
export const waitForEventOutput: JsonSchema = asTool(WaitResultSchema);
export const listEventsOutput: JsonSchema = asTool(EventPageSchema);
export const listEventTypesOutput: JsonSchema = asTool(EventTypeListSchema);
export const webhookOutput: JsonSchema = asTool(WebhookSchema);
export const createdWebhookOutput: JsonSchema = asTool(WebhookWithSecretSchema);
export const pingOutput: JsonSchema = asTool(WebhookPingSchema);
export const listWebhooksOutput: JsonSchema = asTool(WebhookListSchema);

/** An operation's idempotency key, as a tool argument (HTTP takes it as the Idempotency-Key header). */
const idempotencyKey = Type.Optional(
  Type.String({
    minLength: 1,
    maxLength: 255,
    pattern: '^[\\x21-\\x7e]+$',
    description: 'Optional. Pass the same key when you retry this call (e.g. after a timeout): within 24 h the first answer is returned and nothing is queued again.',
  }),
);

export const resendDeliveryInput: JsonSchema = asTool(
  Type.Object(
    {
      ...idArgument.properties,
      delivery_id: Type.String({ minLength: 1, maxLength: 64, description: 'The delivery to send again (dlv_…): `delivery_id` of an attempt in get_event_deliveries.' }),
      idempotency_key: idempotencyKey,
    },
    { additionalProperties: false },
  ),
);
export const resendDeliveryOutput: JsonSchema = asTool(ResendResultSchema);

export const recoverDeliveriesInput: JsonSchema = asTool(
  Type.Object(
    {
      ...idArgument.properties,
      ...described(RecoverBody, { since: `ISO 8601 time, at most 30 days ago: every delivery to this subscription created since then that failed for good is sent again (at most ${MAX_RECOVER_DELIVERIES} per call).` }).properties,
      idempotency_key: idempotencyKey,
    },
    { additionalProperties: false },
  ),
);
export const recoverDeliveriesOutput: JsonSchema = asTool(RecoverResultSchema);

export const replayEventsInput: JsonSchema = asTool(
  Type.Object(
    {
      ...idArgument.properties,
      ...described(ReplayBody, {
        since: 'A `cursor` from list_events or wait_for_event: events strictly after it are delivered again.',
        until: 'Optional `cursor`: the last event to deliver (included). Omit for everything stored so far.',
      }).properties,
      idempotency_key: idempotencyKey,
    },
    { additionalProperties: false },
  ),
);
export const replayEventsOutput: JsonSchema = asTool(ReplayResultSchema);

/** Only MCP answers these two. */
export const deletedOutput: JsonSchema = asTool(Type.Object({ id: Type.String(), deleted: Type.Literal(true) }));
export const whoamiOutput: JsonSchema = asTool(Type.Object({ account_id: Type.String(), user: UserSchema }));
