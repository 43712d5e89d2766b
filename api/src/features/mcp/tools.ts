/**
 * The MCP tools. Each is a thin adapter: arguments checked against its
 * inputSchema, one call to the service the HTTP route uses, the service's
 * answer as the result. No rule of the event log or of webhooks is here.
 */
import type { ApiConfig } from '../../config.js';
import type { ApiDeps } from '../../deps.js';
import type { AuthContext } from '../../auth-context.js';
import { valueValidator, type Validator } from '../../validation.js';
import { type DeliverySearchQuery, eventDeliveries, SEARCH_DEFAULT_LIMIT, searchDeliveries, type StatsWindow, webhookStats } from '../activity/index.js';
import { profile } from '../auth/index.js';
import { EVENT_TYPE_LIST } from '../event-types/index.js';
import type { WaitInput } from '../events/index.js';
import { listEvents, waitForEvent } from '../events/index.js';
import type { CreateWebhookInput, RecoverInput, ReplayInput, RotateSecretInput, UpdateWebhookInput } from '../webhooks/index.js';
import { checkOpKey, createWebhook, deleteWebhook, listWebhooks, MAX_RECOVER_DELIVERIES, MAX_REPLAY_EVENTS, pingWebhook, recoverDeliveries, replayEvents, resendDelivery, rotateSecret, runOnce, updateWebhook } from '../webhooks/index.js';
import {
  createdWebhookOutput,
  createWebhookInput,
  deletedOutput,
  eventDeliveriesInput,
  eventDeliveriesOutput,
  type JsonSchema,
  listEventsInput,
  listEventsOutput,
  listEventTypesOutput,
  listWebhooksOutput,
  noArguments,
  pingOutput,
  recoverDeliveriesInput,
  recoverDeliveriesOutput,
  replayEventsInput,
  replayEventsOutput,
  resendDeliveryInput,
  resendDeliveryOutput,
  rotatedSecretOutput,
  searchDeliveriesInput,
  searchDeliveriesOutput,
  rotateWebhookSecretInput,
  updateWebhookInput,
  waitForEventInput,
  waitForEventOutput,
  webhookIdInput,
  webhookOutput,
  webhookStatsInput,
  webhookStatsOutput,
  whoamiOutput,
} from './schemas.js';

/** The account a `svc_` key belongs to; tools/call never runs without one. */
export type ToolCaller = AuthContext;

export interface ToolContext {
  deps: ApiDeps;
  caller: ToolCaller;
  /** Aborted when the HTTP client goes away; long waits stop then. */
  signal: AbortSignal;
}

/** Hints for clients deciding what to confirm with a human (MCP ToolAnnotations). */
interface ToolAnnotations {
  readOnlyHint?: boolean;
  destructiveHint?: boolean;
  idempotentHint?: boolean;
  openWorldHint?: boolean;
}

/** A tool as written in the tables below: what tools/list shows of it, and what it does. */
interface ToolSpec<A> {
  title: string;
  description: string;
  annotations: ToolAnnotations;
  inputSchema: JsonSchema;
  outputSchema: JsonSchema;
  run(ctx: ToolContext, args: A): Promise<object>;
}

/** A tool as the server calls it: named, with its arguments' validator. */
export interface Tool extends Omit<ToolSpec<Record<string, unknown>>, 'run'> {
  name: string;
  /** Throws a validation_failed AppError listing every bad argument. */
  validate: Validator<Record<string, unknown>>;
  run(ctx: ToolContext, args: Record<string, unknown>): Promise<Record<string, unknown>>;
}

function tool<A>(name: string, spec: ToolSpec<A>): Tool {
  return {
    name,
    ...spec,
    validate: valueValidator<Record<string, unknown>>(spec.inputSchema, 'arguments'),
    run: async (ctx, args) => (await spec.run(ctx, args as A)) as Record<string, unknown>,
  };
}

const readOnly: ToolAnnotations = { readOnlyHint: true, openWorldHint: false };

function eventTools(config: ApiConfig): Tool[] {
  return [
    tool<WaitInput>('wait_for_event', {
      title: 'Wait for the next event',
      description: [
        'Waits for the next event on the account (a call starting, ending, transcribed or completed, a human takeover, an SMS/WhatsApp message received or sent, a webhook test ping) and returns it as {event}.',
        `Blocks until a matching event arrives or timeout_ms passes (at most ${config.events.longPollMaxMs} ms); then returns {event: null, timed_out: true, cursor}: call again to keep waiting.`,
        "To miss nothing between calls, pass the previous result's cursor (event.cursor, or cursor after a time-out) as since.",
      ].join(' '),
      annotations: readOnly,
      inputSchema: waitForEventInput(config),
      outputSchema: waitForEventOutput,
      run: ({ deps, caller, signal }, args) => waitForEvent(deps, caller.accountId, args, signal),
    }),
    tool<Record<string, unknown>>('list_events', {
      title: 'List past events',
      description:
        "Lists the account's stored events, oldest first, as {events, cursor}. Pass the returned cursor back as since to read the next page; an empty page means you are up to date (keep the same cursor for later).",
      annotations: readOnly,
      inputSchema: listEventsInput,
      outputSchema: listEventsOutput,
      run: ({ deps, caller }, args) => listEvents(deps, caller.accountId, args),
    }),
    tool<Record<string, never>>('list_event_types', {
      title: 'List the event types',
      description:
        'Lists every event type as {event_types: [{type, description, data_schema}]}: when each is fired, and the JSON Schema of its data (the fields producers send; none is required, others may appear). Use it to choose the types for wait_for_event, list_events or create_webhook, and to read an event\'s data. The same for every account; as GET /api/v1/event-types answers.',
      annotations: readOnly,
      inputSchema: noArguments,
      outputSchema: listEventTypesOutput,
      run: () => Promise.resolve(EVENT_TYPE_LIST),
    }),
  ];
}

const webhookTools: Tool[] = [
  tool<Record<string, never>>('list_webhooks', {
    title: 'List webhook subscriptions',
    description:
      "Lists the account's webhook subscriptions as {webhooks}: id, url, events, description, and the outcome of the last delivery attempt (last_status, last_delivery_at, last_error). Secrets are not shown.",
    annotations: readOnly,
    inputSchema: noArguments,
    outputSchema: listWebhooksOutput,
    run: ({ deps, caller }) => listWebhooks(deps, caller.accountId),
  }),
  tool<CreateWebhookInput>('create_webhook', {
    title: 'Create a webhook subscription',
    description:
      'Subscribes an HTTPS URL to the account\'s events: each matching event is POSTed to it, signed with the subscription\'s whsec_ secret (header X-Service-Signature: sha256=<hex HMAC-SHA256 of the raw body>). Returns the subscription with its secret, which is shown only here. The URL must be HTTPS on a public address.',
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
    inputSchema: createWebhookInput,
    outputSchema: createdWebhookOutput,
    run: ({ deps, caller }, args) => createWebhook(deps, caller.accountId, args),
  }),
  tool<UpdateWebhookInput & { id: string }>('update_webhook', {
    title: 'Change or disable a webhook subscription',
    description:
      'Changes any of url, events, description, enabled, rate_limit, ordering and headers of one subscription (by id). enabled: false stops all deliveries to it (those queued or retrying are given up); enabled: true resumes it for events from then on. Returns the subscription as list_webhooks shows it (no secret).',
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: true },
    inputSchema: updateWebhookInput,
    outputSchema: webhookOutput,
    run: ({ deps, caller }, { id, ...changes }) => updateWebhook(deps, caller.accountId, id, changes),
  }),
  tool<RotateSecretInput & { id: string }>('rotate_webhook_secret', {
    title: 'Rotate a webhook signing secret',
    description:
      'Replaces the whsec_ signing secret of one subscription (by id) and returns {secret, previous_secret_expires_at}. Until then deliveries carry a Standard Webhooks signature (webhook-signature) made with each secret, so a receiver holding either accepts them; X-Service-Signature uses the new secret only. Give the new secret to the receiver before the old one expires. Rotating again meanwhile drops the oldest secret at once.',
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: false },
    inputSchema: rotateWebhookSecretInput,
    outputSchema: rotatedSecretOutput,
    run: ({ deps, caller }, { id, ...input }) => rotateSecret(deps, caller.accountId, id, input),
  }),
  tool<{ id: string }>('delete_webhook', {
    title: 'Delete a webhook subscription',
    description: 'Deletes one webhook subscription by id; its pending deliveries are dropped. Returns {id, deleted: true}.',
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    inputSchema: webhookIdInput,
    outputSchema: deletedOutput,
    run: async ({ deps, caller }, { id }) => {
      await deleteWebhook(deps, caller.accountId, id);
      return { id, deleted: true };
    },
  }),
  tool<{ id: string }>('ping_webhook', {
    title: 'Send a test ping to a webhook',
    description:
      'Sends a webhook.ping event to one subscription, to test its receiver. Returns {event_id} once the event is in the log; the delivery follows within seconds (its outcome shows in list_webhooks as last_status).',
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
    inputSchema: webhookIdInput,
    outputSchema: pingOutput,
    run: ({ deps, caller }, { id }) => pingWebhook(deps, caller.accountId, id),
  }),
  tool<{ id: string; delivery_id: string; idempotency_key?: string }>('resend_delivery', {
    title: 'Send one webhook delivery again',
    description:
      "Sends one delivery of a subscription again, now, whatever its state (e.g. one that failed, after the receiver was fixed), as a new delivery with the same body; returns {delivery_id, resent_from, event_id, trigger}. Its attempts show trigger 'resend' in get_event_deliveries. Find delivery ids there.",
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
    inputSchema: resendDeliveryInput,
    outputSchema: resendDeliveryOutput,
    run: async ({ deps, caller }, { id, delivery_id: deliveryId, idempotency_key: key }) => {
      const accountId = caller.accountId;
      return (await runOnce(deps, { accountId, op: 'resend', key: checkOpKey(key), request: { id, deliveryId } }, (seed) => resendDelivery(deps, accountId, id, deliveryId, seed))).result;
    },
  }),
  tool<RecoverInput & { id: string; idempotency_key?: string }>('recover_webhook_deliveries', {
    title: 'Send again the failed deliveries of a webhook',
    description: `Sends again every delivery to one subscription that failed for good since a time (e.g. after its receiver was down), once per event. Returns {queued, truncated, next_since, next_after_id}: at most ${MAX_RECOVER_DELIVERIES} failed deliveries per call; when truncated, call again with since = next_since and after_id = next_after_id.`,
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
    inputSchema: recoverDeliveriesInput,
    outputSchema: recoverDeliveriesOutput,
    run: async ({ deps, caller }, { id, idempotency_key: key, ...input }) => {
      const accountId = caller.accountId;
      return (await runOnce(deps, { accountId, op: 'recover', key: checkOpKey(key), request: { id, input } }, () => recoverDeliveries(deps, accountId, id, input))).result;
    },
  }),
  tool<ReplayInput & { id: string; idempotency_key?: string }>('replay_events_to_webhook', {
    title: "Deliver past events to a webhook again",
    description: `Delivers to one subscription every event of the account after the cursor since (and up to until, included) whose type it takes, in log order, also events from before it existed. Returns {queued, cursor, truncated}: at most ${MAX_REPLAY_EVENTS} events per call; when truncated, call again with since = cursor.`,
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: true },
    inputSchema: replayEventsInput,
    outputSchema: replayEventsOutput,
    run: async ({ deps, caller }, { id, idempotency_key: key, ...input }) => {
      const accountId = caller.accountId;
      return (await runOnce(deps, { accountId, op: 'replay', key: checkOpKey(key), request: { id, input } }, (seed) => replayEvents(deps, accountId, id, input, seed))).result;
    },
  }),
  tool<{ id: string; window?: StatsWindow }>('get_webhook_stats', {
    title: "A webhook's delivery stats",
    description:
      "How one subscription's deliveries went over the last hour (window 1h, the default) or day (24h): attempts per bucket as succeeded, retrying or failed, and latency p50/p99, as GET /api/v1/webhooks/{id}/stats answers. Use it to tell whether a receiver is healthy.",
    annotations: readOnly,
    inputSchema: webhookStatsInput,
    outputSchema: webhookStatsOutput,
    run: ({ deps, caller }, { id, window }) => webhookStats(deps, caller.accountId, id, window ?? '1h'),
  }),
  tool<{ event_id: string }>('get_event_deliveries', {
    title: "An event's deliveries",
    description:
      'One event with each delivery made for it (one per subscription it matched) and every attempt (HTTP status, outcome, duration, next attempt), as GET /api/v1/events/{id}/deliveries answers. Use it to find out whether and when a webhook received an event.',
    annotations: readOnly,
    inputSchema: eventDeliveriesInput,
    outputSchema: eventDeliveriesOutput,
    run: ({ deps, caller }, { event_id }) => eventDeliveries(deps, caller.accountId, event_id),
  }),
  tool<Partial<DeliverySearchQuery>>('search_deliveries', {
    title: 'Search webhook delivery attempts',
    description:
      "Searches the delivery attempts of all the account's subscriptions, newest first, as GET /api/v1/deliveries answers: {attempts, next_cursor}, each attempt with its webhook_id, event_id, HTTP status, outcome and time. Filter by outcome (e.g. failed), status (e.g. 5xx), event_type, webhook_id and time (from, to). Use it to find which deliveries failed and why; to read further back pass next_cursor as cursor with the same filters, until it is null.",
    annotations: readOnly,
    inputSchema: searchDeliveriesInput,
    outputSchema: searchDeliveriesOutput,
    run: ({ deps, caller }, args) => searchDeliveries(deps, caller.accountId, { ...args, limit: args.limit ?? SEARCH_DEFAULT_LIMIT }),
  }),
];

const whoami = tool<Record<string, never>>('whoami', {
  title: 'Who am I',
  description: "Returns the account the API key belongs to: {account_id, user} with the user's profile (email, name, plan, key preview), as GET /api/auth/me shows it.",
  annotations: readOnly,
  inputSchema: noArguments,
  outputSchema: whoamiOutput,
  run: async ({ deps, caller }) => ({ account_id: caller.accountId, user: await profile(deps, caller.userId) }),
});

/** The tools of one app, in the order tools/list shows them. Built once per app (schemas depend on config). */
export function createTools(config: ApiConfig): ReadonlyMap<string, Tool> {
  return new Map([...eventTools(config), ...webhookTools, whoami].map((t) => [t.name, t]));
}
