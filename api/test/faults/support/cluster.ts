/**
 * One deployment for a fault test: API and delivery processes sharing a topic
 * and a database of the private infra instance, plus the client calls the
 * tests make against it (accounts, ingest, polling every event).
 */
import { TEST_SECRETS, uniqueName } from '#test-support/env.js';
import { call } from '../../support/api.js';
import { createAccount, type TestAccount } from '../../support/accounts.js';
import { privateInfra, type PrivateInfra } from './infra.js';
import { GENEROUS_LIMITS as TEST_LIMITS } from '../../support/limits.js';
import { freePort, ServiceProcess } from './processes.js';

/** The producers' bearer secret in these deployments. */
export const INGEST_TOKEN = 'fault-tests-ingest-token-0000000000';

/** Far above anything the tests do: the fault tests are about faults, not budgets. */
const GENEROUS_LIMITS: Record<string, string> = {
  ...TEST_LIMITS,
  PASSWORD_SCRYPT_N: '16384',
  PASSWORD_HASH_QUEUE: '100000',
};

export interface ClusterOptions {
  /** Extra settings for every API process. */
  apiEnv?: Record<string, string>;
  /** Extra settings for every delivery process. */
  deliveryEnv?: Record<string, string>;
  /** The services to run on (default: the run's private single-node instance). */
  infra?: PrivateInfra;
}

export class Cluster {
  readonly topic = uniqueName('events-fault');
  readonly db = uniqueName('fault').replace(/-/g, '_');
  readonly apis: ServiceProcess[] = [];
  readonly deliveries: ServiceProcess[] = [];

  private constructor(
    readonly infra: PrivateInfra,
    private readonly opts: ClusterOptions,
  ) {}

  static async create(opts: ClusterOptions = {}): Promise<Cluster> {
    return new Cluster(opts.infra ?? (await privateInfra()), opts);
  }

  baseEnv(): Record<string, string> {
    return {
      NODE_ENV: 'test',
      LOG_LEVEL: process.env.FAULTS_LOG_LEVEL ?? 'info',
      ...this.infra.endpoints,
      EVENTS_TOPIC: this.topic,
      EVENTS_PARTITIONS: '3',
      MONGO_DB: this.db,
      ...TEST_SECRETS,
      INGEST_TOKEN,
      // Subscriptions point at the test's HTTPS receiver on 127.0.0.1 (development setting).
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
    };
  }

  /** Adds an API process (not started). */
  async addApi(name: string, env: Record<string, string> = {}): Promise<ServiceProcess> {
    const port = await freePort();
    const api = new ServiceProcess(name, 'api', { ...this.baseEnv(), ...GENEROUS_LIMITS, HOST: '127.0.0.1', PORT: String(port), INSTANCE_ID: name, ...this.opts.apiEnv, ...env }, `http://127.0.0.1:${port}`);
    this.apis.push(api);
    return api;
  }

  /** Adds a delivery process (not started). */
  addDelivery(name: string, env: Record<string, string> = {}): ServiceProcess {
    // METRICS_PORT 0: no metrics server, which would collide on its fixed port with other runs' workers.
    const worker = new ServiceProcess(name, 'delivery', { ...this.baseEnv(), INSTANCE_ID: name, KAFKA_CLIENT_ID: name, METRICS_PORT: '0', ...this.opts.deliveryEnv, ...env });
    this.deliveries.push(worker);
    return worker;
  }

  /** Every process of the cluster that died without the test asking it to. */
  crashes(): string[] {
    return [...this.apis, ...this.deliveries].flatMap((p) => p.unexpectedExits.map((e) => `${p.name} exited (${e.signal ?? e.code})`));
  }
}

export function apiUrl(api: ServiceProcess): string {
  if (!api.url) throw new Error(`${api.name} is not an API process`);
  return api.url;
}

export function newAccount(api: ServiceProcess): Promise<TestAccount> {
  return createAccount(apiUrl(api));
}

export interface IngestOutcome {
  status: number;
  /** Event ids the API acknowledged (202 only). */
  ids: string[];
  retryAfter: string | null;
  body: unknown;
  ms: number;
}

/** Creates a subscription through the API; returns its id and signing secret. */
export async function createWebhook(api: ServiceProcess, apiKey: string, url: string, events: string[] = ['*']): Promise<{ id: string; secret: string }> {
  const res = await call(apiUrl(api), 'POST', '/api/v1/webhooks', { headers: { authorization: `Bearer ${apiKey}` }, body: { url, events, description: 'fault test' } });
  if (res.status !== 201) throw new Error(`webhook creation answered ${res.status}: ${JSON.stringify(res.body)}`);
  return { id: res.body.id, secret: res.body.secret };
}

/** Ingests `count` events for one account in batches; throws unless every request is acknowledged. Returns the ids. */
export async function ingestMany(api: ServiceProcess, accountId: string, count: number, batch = 250): Promise<string[]> {
  const ids: string[] = [];
  for (let sent = 0; sent < count; sent += batch) {
    const n = Math.min(batch, count - sent);
    const events = Array.from({ length: n }, (_, i) => ({ account_id: accountId, type: 'message.received', data: { seq: sent + i } }));
    const outcome = await ingestRaw(apiUrl(api), events);
    if (outcome.status !== 202) throw new Error(`ingest answered ${outcome.status}: ${JSON.stringify(outcome.body)}`);
    ids.push(...outcome.ids);
  }
  return ids;
}

/** One ingest request; never throws for an HTTP answer (a network failure counts as status 0). */
export async function ingestRaw(base: string, events: { account_id: string; type: string; data?: Record<string, unknown> }[], timeoutMs = 120_000): Promise<IngestOutcome> {
  const started = Date.now();
  try {
    const res = await fetch(`${base}/internal/v1/events`, {
      method: 'POST',
      headers: { authorization: `Bearer ${INGEST_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ events: events.map((e) => ({ data: {}, ...e })) }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await res.text();
    let body: any = text;
    try {
      body = JSON.parse(text);
    } catch {
      // not JSON: kept as text for the failure message
    }
    const ids = res.status === 202 ? (body.events as { id: string }[]).map((e) => e.id) : [];
    return { status: res.status, ids, retryAfter: res.headers.get('retry-after'), body, ms: Date.now() - started };
  } catch (err) {
    return { status: 0, ids: [], retryAfter: null, body: String(err), ms: Date.now() - started };
  }
}

/** A poll answered other than 200. */
class PollError extends Error {
  constructor(
    readonly status: number,
    body: unknown,
    readonly retryAfter: string | null,
  ) {
    super(`polling answered ${status}: ${JSON.stringify(body)}`);
  }
}

/** Every event of the account, by cursor polling from the start; throws on any non-200. */
export async function pollAll(base: string, apiKey: string): Promise<{ id: string; type: string; data: any; cursor: string }[]> {
  const all: { id: string; type: string; data: any; cursor: string }[] = [];
  let since: string | null = null;
  for (;;) {
    const query: string = since ? `?limit=500&since=${encodeURIComponent(since)}` : '?limit=500';
    const res = await call(base, 'GET', `/api/v1/events${query}`, { headers: { authorization: `Bearer ${apiKey}` } });
    if (res.status !== 200) throw new PollError(res.status, res.body, res.headers.get('retry-after'));
    all.push(...res.body.events);
    if (res.body.events.length === 0) return all;
    since = res.body.cursor;
  }
}

/** How often each id occurs in `found`, for the acknowledged `ids`: missing ones and duplicates. */
export function tally(ids: Iterable<string>, found: Iterable<string>): { expected: number; found: number; missing: string[]; duplicated: string[]; unacknowledged: number } {
  const counts = new Map<string, number>();
  for (const id of found) counts.set(id, (counts.get(id) ?? 0) + 1);
  const expected = new Set(ids);
  const missing = [...expected].filter((id) => !counts.has(id));
  const duplicated = [...counts].filter(([, n]) => n > 1).map(([id]) => id);
  const unacknowledged = [...counts.keys()].filter((id) => !expected.has(id)).length;
  return { expected: expected.size, found: [...expected].filter((id) => counts.has(id)).length, missing, duplicated, unacknowledged };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** pollAll, where a 503 (the documented "not yet": the store or the materializer still catching up after an outage) means try again, until `timeoutMs`. */
export async function pollAllWhenReady(base: string, apiKey: string, timeoutMs: number): Promise<Awaited<ReturnType<typeof pollAll>>> {
  return until('a poll answered 200', () => pollAll(base, apiKey).catch(notYet), timeoutMs, 1000);
}

function notYet(err: unknown): undefined {
  if (err instanceof PollError && err.status === 503) return undefined;
  throw err;
}

/** A poll answered 503: when, and the Retry-After it carried. */
export interface PollRefusal {
  at: number;
  retryAfter: string | null;
}

/** pollAll, or undefined when a poll answered 503 (noted in `refusals`); throws on any other non-200. */
export async function pollAllOrRefused(base: string, apiKey: string, refusals: PollRefusal[]): Promise<Awaited<ReturnType<typeof pollAll>> | undefined> {
  try {
    return await pollAll(base, apiKey);
  } catch (err) {
    if (err instanceof PollError && err.status === 503) {
      refusals.push({ at: Date.now(), retryAfter: err.retryAfter });
      return undefined;
    }
    throw err;
  }
}

/**
 * Polls every account until each acknowledged id is readable (a 503 counts as
 * not yet), then returns the tally (missing, duplicated) of what polling found.
 */
export async function untilAllPollable(base: string, accounts: { apiKey: string }[], acked: Iterable<string>, timeoutMs: number): Promise<ReturnType<typeof tally>> {
  const ids = [...acked];
  let result!: ReturnType<typeof tally>;
  await until(
    'every acknowledged event pollable',
    async () => {
      const pages = await Promise.all(accounts.map((a) => pollAll(base, a.apiKey))).catch(notYet);
      if (!pages) return undefined;
      const found = pages.flat().map((e) => e.id);
      result = tally(ids, found);
      return result.missing.length === 0 || undefined;
    },
    timeoutMs,
    1000,
  );
  return result;
}

/** Polls `check` until it returns a value other than undefined/false, or throws after `timeoutMs`. */
export async function until<T>(what: string, check: () => Promise<T | undefined | false> | T | undefined | false, timeoutMs: number, everyMs = 250): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}
