#!/usr/bin/env node
/**
 * `event-platform` (npx @event-platform/client …): the account's events on a
 * developer's machine.
 *
 *   listen --forward-to URL   stream the events and POST each to URL, signed
 *                             like a real delivery with a session secret
 *   events tail               print the events as they come (one JSON per line)
 *   events emit               put test events in the log (development: the ingest route)
 *   event-types               the event types, with the JSON Schema of each one's data
 *   webhooks list             the account's subscriptions
 *   webhooks test ID          send a webhook.ping to one and show the attempt
 *   webhooks deliveries       search the attempts of all subscriptions (failed ones, 5xx, …)
 *
 * Credentials: EVENT_PLATFORM_API_KEY (or --api-key, with a warning: argv is
 * visible to every user in `ps`); the API at --api-url or EVENT_PLATFORM_API_URL
 * (default http://localhost:3000), plain http:// only to loopback unless
 * --insecure-http.
 */
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { EventPlatform } from './client.js';
import { ApiError, EventPlatformError } from './errors.js';
import { DEFAULT_BASE_URL } from './http.js';
import { EVENT_TYPES, type EventType } from './types.js';
import { signDelivery } from './verify.js';

const VERSION = '0.1.0';
/** The API's development ingest token (it accepts it only when listening on loopback). */
const DEV_INGEST_TOKEN = 'dev-only-ingest-token-change-me-000';

const USAGE = `usage: event-platform <command> [options]

commands:
  listen --forward-to URL [--events TYPES] [--since CURSOR] [--secret whsec_…] [--timeout-ms N]
      Streams the account's events and POSTs each one to URL, signed exactly as a
      webhook delivery (X-Service-Signature and Standard Webhooks headers) with a
      session secret printed at start (or your own: EVENT_PLATFORM_WEBHOOK_SECRET,
      or --secret; not printed). One line per event.
  events tail [--types TYPES] [--since CURSOR]
      Prints each event as one line of JSON, as it comes.
  events emit [--type TYPE] [--count N] [--data JSON] [--ingest-token TOKEN]
      Development: puts events in the account's log through the ingest route
      (token: --ingest-token, EVENT_PLATFORM_INGEST_TOKEN, else the development default).
  event-types [--json]
      Lists the event types and when each is fired; --json prints the catalog with
      the JSON Schema of each type's data (for generating types).
  webhooks list [--json]
  webhooks test ID [--wait SECONDS]
      Sends a webhook.ping to the subscription and waits (default 30 s, 0: not) for its attempt.
  webhooks deliveries [--outcome LIST] [--status RANGE] [--types TYPES] [--webhook ID]
                      [--from TIME] [--to TIME] [--limit N] [--cursor CURSOR] [--json]
      The delivery attempts of all the account's subscriptions, newest first (default 50):
      --outcome ok,timeout,http_5xx,… or failed; --status 404, 5xx or 400-429; --from
      (inclusive) and --to (exclusive) as ISO 8601 times. Prints where to continue when
      there is more.

options:
  --api-key KEY    the platform API key (svc_…); better EVENT_PLATFORM_API_KEY:
                   the command line is visible to every user of the machine (ps)
  --api-url URL    the API; else EVENT_PLATFORM_API_URL, else ${DEFAULT_BASE_URL}
  --insecure-http  allow plain http:// to an API that is not on loopback
                   (the key then crosses the network in clear)
  --help, --version

TYPES: comma-separated event types (${EVENT_TYPES.join(', ')})`;

class UsageError extends Error {}

interface Env {
  apiKey?: string;
  apiUrl?: string;
  ingestToken?: string;
  webhookSecret?: string;
}

function readEnv(): Env {
  // The CLI's own settings, read once here (it is an entry point, like the services' main.ts).
  // eslint-disable-next-line no-restricted-properties
  const env = process.env;
  return {
    apiKey: env.EVENT_PLATFORM_API_KEY || undefined,
    apiUrl: env.EVENT_PLATFORM_API_URL || undefined,
    ingestToken: env.EVENT_PLATFORM_INGEST_TOKEN || undefined,
    webhookSecret: env.EVENT_PLATFORM_WEBHOOK_SECRET || undefined,
  };
}

function parseTypes(raw: string | undefined, flag: string): EventType[] | undefined {
  if (raw === undefined || raw === '') return undefined;
  const types = raw.split(',').map((t) => t.trim()).filter(Boolean);
  for (const t of types) if (!(EVENT_TYPES as readonly string[]).includes(t)) throw new UsageError(`${flag}: unknown event type ${t}`);
  return types as EventType[];
}

function positiveInt(raw: string, flag: string, min: number): number {
  if (!/^\d+$/.test(raw) || Number(raw) < min) throw new UsageError(`${flag} must be an integer >= ${min}`);
  return Number(raw);
}

const out = (line: string): void => void process.stdout.write(line + '\n');
const info = (line: string): void => void process.stderr.write(line + '\n');

/** The options of every command that calls the API. */
const CONNECTION = {
  'api-key': { type: 'string' },
  'api-url': { type: 'string' },
  'insecure-http': { type: 'boolean', default: false },
} as const;

/** A secret given on the command line: every user of the machine can read it (`ps`, /proc), and shell history keeps it. */
function warnArgv(flag: string, variable: string): void {
  info(`warning: ${flag} on the command line is visible to other users of this machine (ps, /proc) and kept in shell history; set ${variable} instead`);
}

/** Loopback by the URL's own host (as written, not resolved): localhost, 127.0.0.0/8, [::1]. */
function isLoopback(url: URL): boolean {
  return url.hostname === 'localhost' || url.hostname === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(url.hostname);
}

/** The API's URL; plain http:// (the key in clear on the wire) only to loopback, or with --insecure-http. */
function apiUrl(raw: string, insecureHttp: boolean): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UsageError(`--api-url: not a URL: ${raw}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UsageError('--api-url must be an http or https URL');
  if (url.protocol === 'http:' && !isLoopback(url) && !insecureHttp) {
    throw new UsageError(`refusing plain http:// to ${url.host}: the API key would cross the network in clear; use https://, or --insecure-http to send it anyway`);
  }
  return raw;
}

function client(values: { 'api-key'?: string; 'api-url'?: string; 'insecure-http'?: boolean }, env: Env, extra: { ingestToken?: string } = {}): EventPlatform {
  const apiKey = values['api-key'] ?? env.apiKey;
  if (!apiKey) throw new UsageError('an API key is needed: EVENT_PLATFORM_API_KEY (or --api-key)');
  if (values['api-key'] !== undefined) warnArgv('--api-key', 'EVENT_PLATFORM_API_KEY');
  const baseUrl = apiUrl(values['api-url'] ?? env.apiUrl ?? DEFAULT_BASE_URL, values['insecure-http'] === true);
  return new EventPlatform({ apiKey, baseUrl, userAgent: `event-platform-cli/${VERSION}`, ...extra });
}

/** Stops on ^C / SIGTERM: the listen loops end and the process exits 0. */
function stopSignal(): AbortSignal {
  const controller = new AbortController();
  const stop = (): void => controller.abort();
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  return controller.signal;
}

async function listenCommand(args: string[], env: Env): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      'forward-to': { type: 'string' },
      events: { type: 'string' },
      since: { type: 'string' },
      secret: { type: 'string' },
      'timeout-ms': { type: 'string', default: '10000' },
      ...CONNECTION,
    },
  });
  const target = values['forward-to'];
  if (!target) throw new UsageError('listen needs --forward-to URL');
  let targetUrl: URL;
  try {
    targetUrl = new URL(target);
  } catch {
    throw new UsageError(`--forward-to: not a URL: ${target}`);
  }
  if (targetUrl.protocol !== 'http:' && targetUrl.protocol !== 'https:') throw new UsageError('--forward-to must be an http or https URL');
  const types = parseTypes(values.events, '--events');
  const timeoutMs = positiveInt(values['timeout-ms'], '--timeout-ms', 1);
  const given = values.secret ?? env.webhookSecret;
  const secretFrom = values.secret !== undefined ? '--secret' : 'EVENT_PLATFORM_WEBHOOK_SECRET';
  if (values.secret !== undefined) warnArgv('--secret', 'EVENT_PLATFORM_WEBHOOK_SECRET');
  const secret = given ?? 'whsec_' + randomBytes(32).toString('base64');
  if (!/^whsec_[A-Za-z0-9+/]+={0,2}$/.test(secret)) throw new UsageError(`${secretFrom} must be whsec_ followed by base64`);
  // A secret the user gave is theirs already: named by its end, never echoed (terminals are logged and shared).
  const shown = given === undefined ? secret : `the one you gave (whsec_…${secret.slice(-4)})`;
  const api = client(values, env);
  const me = await api.auth.me();
  const signal = stopSignal();
  let ready = false;
  for await (const event of api.events.listen({
    types,
    since: values.since,
    signal,
    onOpen: (transport) => {
      if (ready) return;
      ready = true;
      out(`Ready! Forwarding events of ${me.id}${types ? ` (${types.join(', ')})` : ''} to ${targetUrl.href} over ${transport}`);
      out(`Your webhook signing secret for this session is ${shown} (^C to quit)`);
    },
    onTransport: (transport, why) => info(`switched to ${transport} (${why})`),
  })) {
    // The body a delivery carries: the event record exactly as the stream gave it.
    const body = JSON.stringify(event);
    const deliveryId = 'dlv_' + randomBytes(12).toString('hex');
    const started = Date.now();
    let result: string;
    try {
      const res = await fetch(targetUrl, {
        method: 'POST',
        headers: {
          'Content-Type': 'application/json',
          'User-Agent': `event-platform-cli/${VERSION}`,
          ...signDelivery(secret, deliveryId, body),
          'X-Service-Event': event.type,
          'X-Service-Delivery': deliveryId,
        },
        body,
        redirect: 'manual',
        signal: AbortSignal.any([AbortSignal.timeout(timeoutMs), signal]),
      });
      await res.arrayBuffer().catch(() => undefined);
      result = `${res.status}`;
    } catch (err) {
      if (signal.aborted) break;
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      result = `error ${(err as Error).name === 'TimeoutError' ? 'timeout' : (cause?.code ?? cause?.message ?? (err as Error).message)}`;
    }
    out(`${new Date().toISOString()}  ${event.type.padEnd(16)}  ${event.id}  --> ${result} (${Date.now() - started} ms)  ${event.cursor}`);
  }
  return 0;
}

async function tailCommand(args: string[], env: Env): Promise<number> {
  const { values } = parseArgs({
    args,
    options: { types: { type: 'string' }, since: { type: 'string' }, ...CONNECTION },
  });
  const types = parseTypes(values.types, '--types');
  const api = client(values, env);
  const signal = stopSignal();
  let ready = false;
  for await (const event of api.events.listen({
    types,
    since: values.since,
    signal,
    onOpen: (transport) => {
      if (!ready) info(`Listening (${transport})${types ? ` for ${types.join(', ')}` : ''}; ^C to quit`);
      ready = true;
    },
  })) {
    out(JSON.stringify(event));
  }
  return 0;
}

async function emitCommand(args: string[], env: Env): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      type: { type: 'string', default: 'message.received' },
      count: { type: 'string', default: '1' },
      data: { type: 'string' },
      'ingest-token': { type: 'string' },
      ...CONNECTION,
    },
  });
  const [type] = parseTypes(values.type, '--type') ?? [];
  if (!type) throw new UsageError('--type is needed');
  const count = positiveInt(values.count, '--count', 1);
  if (count > 1000) throw new UsageError('--count must be at most 1000');
  let data: Record<string, unknown> = {};
  if (values.data !== undefined) {
    try {
      data = JSON.parse(values.data) as Record<string, unknown>;
    } catch {
      throw new UsageError('--data must be a JSON object');
    }
    if (data === null || typeof data !== 'object' || Array.isArray(data)) throw new UsageError('--data must be a JSON object');
  }
  if (values['ingest-token'] !== undefined) warnArgv('--ingest-token', 'EVENT_PLATFORM_INGEST_TOKEN');
  const api = client(values, env, { ingestToken: values['ingest-token'] ?? env.ingestToken ?? DEV_INGEST_TOKEN });
  const me = await api.auth.me();
  const sent = await api.ingest.send(
    Array.from({ length: count }, () => ({ account_id: me.id, type, data })),
    { idempotencyKey: 'cli-' + randomBytes(12).toString('hex') },
  );
  for (const e of sent) out(`${type}  ${e.id}  ${e.cursor}`);
  return 0;
}

async function eventTypesCommand(args: string[], env: Env): Promise<number> {
  const { values } = parseArgs({ args, options: { json: { type: 'boolean', default: false }, ...CONNECTION } });
  const types = await client(values, env).eventTypes.list();
  if (values.json) out(JSON.stringify(types, null, 2));
  else for (const t of types) out(`${t.type.padEnd(16)}  ${t.description}`);
  return 0;
}

async function webhooksList(args: string[], env: Env): Promise<number> {
  const { values } = parseArgs({ args, options: { json: { type: 'boolean', default: false }, ...CONNECTION } });
  const hooks = await client(values, env).webhooks.list();
  if (values.json) {
    out(JSON.stringify(hooks, null, 2));
    return 0;
  }
  if (hooks.length === 0) {
    info('No webhook subscriptions.');
    return 0;
  }
  for (const h of hooks) {
    const last = h.last_status !== null ? String(h.last_status) : (h.last_error ?? '-');
    out([h.id, h.enabled ? 'enabled ' : 'disabled', h.ordering === 'fifo' ? 'fifo     ' : 'unordered', `last=${last}`.padEnd(12), h.events.join(','), h.url].join('  '));
  }
  return 0;
}

async function webhooksTest(args: string[], env: Env): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { wait: { type: 'string', default: '30' }, ...CONNECTION },
  });
  const id = positionals[0];
  if (!id || positionals.length > 1) throw new UsageError('webhooks test needs one subscription id (wh_…)');
  const waitS = positiveInt(values.wait, '--wait', 0);
  const api = client(values, env);
  const { event_id } = await api.webhooks.ping(id);
  out(`Sent webhook.ping ${event_id} to ${id}`);
  if (waitS === 0) return 0;
  const deadline = Date.now() + waitS * 1000;
  const signal = stopSignal();
  while (Date.now() < deadline && !signal.aborted) {
    const attempt = (await api.webhooks.deliveries(id, { limit: 50 })).find((a) => a.event_id === event_id);
    if (attempt) {
      const status = attempt.status !== null ? String(attempt.status) : (attempt.error ?? '');
      out(`Attempt ${attempt.attempt}: ${attempt.outcome} ${status} (${attempt.duration_ms} ms)${attempt.next_attempt_at ? `, next try at ${attempt.next_attempt_at}` : ''}`);
      return attempt.outcome === 'ok' ? 0 : 1;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  info(`No attempt for ${event_id} within ${waitS} s (is the delivery process running?)`);
  return 1;
}

/** Search pages one `webhooks deliveries` run reads at most (each examines up to 1,000 stored attempts). */
const MAX_SEARCH_PAGES = 20;

async function webhooksDeliveries(args: string[], env: Env): Promise<number> {
  const { values } = parseArgs({
    args,
    options: {
      outcome: { type: 'string' },
      status: { type: 'string' },
      types: { type: 'string' },
      webhook: { type: 'string' },
      from: { type: 'string' },
      to: { type: 'string' },
      limit: { type: 'string', default: '50' },
      cursor: { type: 'string' },
      json: { type: 'boolean', default: false },
      ...CONNECTION,
    },
  });
  const limit = positiveInt(values.limit, '--limit', 1);
  const types = parseTypes(values.types, '--types');
  const api = client(values, env);
  const filters = { outcome: values.outcome, status: values.status, event_type: types?.join(','), webhook_id: values.webhook, from: values.from, to: values.to };
  let cursor = values.cursor;
  let left = limit;
  // Short pages (the server's scan bound) are followed until --limit attempts are shown or the range ends.
  for (let page = 0; page < MAX_SEARCH_PAGES && left > 0; page++) {
    const res = await api.webhooks.searchDeliveries({ ...filters, limit: Math.min(left, 200), cursor });
    for (const a of res.attempts) {
      if (values.json) out(JSON.stringify(a));
      else out([a.at, a.webhook_id, a.event_type.padEnd(16), a.outcome.padEnd(8), String(a.status ?? a.error ?? '-').padEnd(4), a.event_id, `attempt ${a.attempt}`].join('  '));
    }
    left -= res.attempts.length;
    cursor = res.next_cursor ?? undefined;
    if (!cursor) break;
  }
  if (cursor) info(`More: --cursor ${cursor}`);
  return 0;
}

export async function main(argv: string[]): Promise<number> {
  const env = readEnv();
  const [command, sub, ...rest] = argv;
  try {
    if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
      out(USAGE);
      return command === undefined ? 2 : 0;
    }
    if (command === '--version') {
      out(VERSION);
      return 0;
    }
    if (command === 'listen') return await listenCommand(argv.slice(1), env);
    if (command === 'events' && sub === 'tail') return await tailCommand(rest, env);
    if (command === 'events' && sub === 'emit') return await emitCommand(rest, env);
    if (command === 'event-types') return await eventTypesCommand(argv.slice(1), env);
    if (command === 'webhooks' && sub === 'list') return await webhooksList(rest, env);
    if (command === 'webhooks' && sub === 'test') return await webhooksTest(rest, env);
    if (command === 'webhooks' && sub === 'deliveries') return await webhooksDeliveries(rest, env);
    throw new UsageError(`unknown command: ${[command, sub].filter(Boolean).join(' ')}`);
  } catch (err) {
    if (err instanceof UsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      info(`event-platform: ${(err as Error).message}\n\n${USAGE}`);
      return 2;
    }
    if (err instanceof ApiError) {
      info(`event-platform: ${err.status} ${err.code}: ${err.message}${err.details.length ? ' (' + err.details.map((d) => `${d.path}: ${d.message}`).join('; ') + ')' : ''}`);
      return 1;
    }
    if (err instanceof EventPlatformError) {
      info(`event-platform: ${err.message}`);
      return 1;
    }
    throw err;
  }
}

process.exitCode = await main(process.argv.slice(2));
