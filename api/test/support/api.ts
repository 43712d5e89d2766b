import http from 'node:http';
import type Router from '@koa/router';
import type Koa from 'koa';
import { atFileEnd, atRunEnd } from '#test-support/cleanup.js';
import { baseTestEnv, ownDatabase } from '#test-support/env.js';
import { loadApiConfig, type ApiConfig } from '../../src/config.js';
import { startApi, type RunningApi } from '../../src/server.js';
import { createApp } from '../../src/app.js';
import { buildOpenApiDocument } from '../../src/features/openapi/document.js';
import { routesOf } from '../../src/middleware/route.js';
import { ResponseChecker } from './openapi.js';
import { GENEROUS_LIMITS } from './limits.js';


/**
 * scrypt at 2^14 instead of the 2^17 default (~8x cheaper): the suite signs up
 * hundreds of accounts. api/test/passwords.test.ts runs the real default.
 */
const FAST_HASHING: Record<string, string> = { PASSWORD_SCRYPT_N: '16384', PASSWORD_HASH_CONCURRENCY: '4', PASSWORD_HASH_QUEUE: '100000' };

/**
 * Test pods never go dormant unless a test asks (events-fanout-dormant.test.ts): a test that waits
 * 30 s on a slow store without reading from a pod, then expects its fan-out to have moved, would
 * otherwise depend on the machine's speed.
 */
const NEVER_DORMANT: Record<string, string> = { FANOUT_DORMANT_MS: '0' };

export function testApiConfig(overrides: Record<string, string> = {}): ApiConfig {
  return loadApiConfig(baseTestEnv({ ...GENEROUS_LIMITS, ...FAST_HASHING, ...NEVER_DORMANT, ...overrides }));
}

/** Starts an API process in-process on a free port; closed when the file ends (`closeAt`; or earlier by the test). */
export async function startTestApi(overrides: Record<string, string> = {}, closeAt: typeof atFileEnd = atFileEnd): Promise<RunningApi> {
  const api = await startApi(testApiConfig(overrides));
  closeAt(() => api.close());
  checkResponses(api);
  return api;
}

/**
 * An API process as `npm start` runs it: NODE_ENV=development with the development secrets
 * (no JWT_SECRET, INGEST_TOKEN or WEBHOOK_SECRET_KEY) and the default limits, on a database of its
 * own (the limits count per client address, and every test's is 127.0.0.1); closed when the file ends.
 */
export async function startDevApi(overrides: Record<string, string> = {}): Promise<RunningApi> {
  const env = baseTestEnv({ NODE_ENV: 'development', MONGO_DB: ownDatabase('dev'), ...overrides });
  for (const name of ['JWT_SECRET', 'INGEST_TOKEN', 'WEBHOOK_SECRET_KEY']) if (!(name in overrides)) delete env[name];
  const api = await startApi(loadApiConfig(env));
  atFileEnd(() => api.close());
  checkResponses(api);
  return api;
}

/**
 * Every JSON response `call()` receives from an API registered here is checked
 * against the OpenAPI document generated from that API's own route registry
 * (the status's documented schema, else `default`; objects closed, so an
 * undocumented field fails too). A mismatch throws from `call()`, failing the
 * test that made the request. Test APIs register themselves when they start
 * (startTestApi, webhookApi).
 */
const checkers = new Map<string, ResponseChecker>();

/** The OpenAPI document of an app, generated from the routes its routers registered. */
export function documentOf(app: Koa): Record<string, unknown> {
  const routers = app.middleware.flatMap((fn) => (fn as unknown as { router?: Router }).router ?? []);
  return buildOpenApiDocument(routers.flatMap(routesOf));
}

/** Checks every JSON answer `call()` gets from `api` (or from `url` with the document of `app`). */
export function checkResponses(api: Pick<RunningApi, 'url' | 'deps'>, app: Koa = createApp(api.deps)): void {
  checkers.set(api.url, new ResponseChecker(documentOf(app)));
}

/** Whether `call()` checks the answers of the API at `url`. */
export const checksResponsesOf = (url: string): boolean => checkers.has(url);

let checked = 0;
/** How many responses `call()` has checked against a document so far in this run. */
export const checkedResponses = (): number => checked;

function checkResponse(base: string, method: string, path: string, res: Response, body: unknown): void {
  const checker = checkers.get(base);
  if (!checker || method.toUpperCase() === 'HEAD' || !/^application\/json\b/.test(res.headers.get('content-type') ?? '')) return;
  const template = checker.templateOf(method, path);
  if (template === null) return; // not a documented operation (an unrouted path's 404, a spelling the router refuses)
  checker.check(method, template, res.status, body);
  checked += 1;
}

let shared: Promise<[RunningApi, RunningApi]> | null = null;

/**
 * Two API processes (A and B) sharing the run's Kafka topic and database, as
 * two pods would. Started once per run: consumer-group joins are slow, so
 * tests share them and isolate themselves by account.
 */
export function sharedApis(): Promise<[RunningApi, RunningApi]> {
  shared ??= Promise.all([startTestApi({ INSTANCE_ID: 'test-a' }, atRunEnd), startTestApi({ INSTANCE_ID: 'test-b' }, atRunEnd)]);
  return shared;
}

export interface JsonResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
}

/** fetch + JSON, for readable tests. */
export async function call<T = any>(base: string, method: string, path: string, opts: { body?: unknown; headers?: Record<string, string>; raw?: string } = {}): Promise<JsonResponse<T>> {
  const headers: Record<string, string> = { ...opts.headers };
  let payload: string | undefined = opts.raw;
  if (opts.body !== undefined) {
    payload = JSON.stringify(opts.body);
    headers['content-type'] ??= 'application/json';
  } else if (opts.raw !== undefined) {
    headers['content-type'] ??= 'application/json';
  }
  const res = await fetch(base + path, { method, headers, body: payload });
  const text = await res.text();
  let body: any = text;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    // leave as text
  }
  checkResponse(base, method, path, res, body);
  return { status: res.status, headers: res.headers, body };
}

/**
 * A request sent exactly as given, path and headers included: fetch (and URL) normalise `..`,
 * `.` and case in paths and will not send a Host of our choosing.
 */
export function rawRequest(base: string, method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: url.hostname, port: url.port, method, path, headers }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}
