/**
 * Walks the app's own route table (every layer of every router, not a list
 * written here) and calls each protected route, without a credential, in every
 * spelling an attacker might try: case, trailing and double slashes,
 * percent-encoding, `;` parameters, `.`/`..` segments. Each route's handler is
 * replaced by a sentinel in this copy of the app, so the test sees exactly
 * whether a request got past the route's guard; a guard that lives in a global
 * middleware keyed on a path prefix shows up here as a reached handler.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type Router from '@koa/router';
import { expect } from 'chai';
import type { Middleware } from 'koa';
import { createApp } from '../src/app.js';
import { accessOf } from '../src/middleware/route.js';
import type { RunningApi } from '../src/server.js';
import { createAccount } from './support/accounts.js';
import { call, rawRequest, startTestApi } from './support/api.js';

interface Layer {
  methods: string[];
  path: string;
  stack: Middleware[];
}

const REACHED = 299;
const METRICS_TOKEN = 'route-walk-metrics-token-0123456789';

function layersOf(app: { middleware: unknown[] }): Layer[] {
  const layers: Layer[] = [];
  for (const fn of app.middleware) {
    const router = (fn as { router?: Router }).router;
    if (router) layers.push(...(router.stack as unknown as Layer[]));
  }
  return layers;
}

/** The path with every `:param` filled, so it names one concrete resource. */
const concrete = (path: string): string => path.replace(/:[A-Za-z_]+/g, 'wh_0000000000000000');

function capitalize(seg: string): string {
  return seg.charAt(0).toUpperCase() + seg.slice(1);
}

/** Spellings of one path that a lenient router, a proxy or a URL parser might take as the same route. */
export function spellings(path: string): string[] {
  const segs = path.split('/').filter(Boolean);
  const last = segs.at(-1) ?? '';
  const head = segs.slice(0, -1);
  const enc = (s: string, upperHex: boolean): string => {
    const i = s.search(/[a-z]/i);
    if (i < 0) return s;
    const hex = s.charCodeAt(i).toString(16);
    return s.slice(0, i) + '%' + (upperHex ? hex.toUpperCase() : hex) + s.slice(i + 1);
  };
  const join = (parts: string[]): string => '/' + parts.join('/');
  const out = [
    path,
    path.toUpperCase(),
    join(segs.map(capitalize)),
    join([...head.map((s) => s.toUpperCase()), last]),
    path + '/',
    path.toUpperCase() + '/',
    '/' + path,
    path.replace(/\/([^/]*)$/, '//$1'),
    join([...head, enc(last, false)]),
    join([enc(segs[0] ?? '', true), ...segs.slice(1)]),
    path + ';x=1',
    join([...head, `${last};jsessionid=1`]),
    join([...head, 'zz', '..', last]),
    join([...head, '.', last]),
    join([...head, last]).replace(/\//g, (m, off: number) => (off > 0 && off === path.lastIndexOf('/') ? '%2F' : m)),
    path + '?x=1',
    path + '#frag',
  ];
  return [...new Set(out)];
}

async function request(base: string, method: string, path: string, body?: string): Promise<{ status: number; text: string }> {
  const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  if (body !== undefined) headers['content-length'] = String(Buffer.byteLength(body));
  const res = await rawRequest(base, method, path, headers, body);
  return { status: res.status, text: res.body };
}

const MCP_TOOL_CALL = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'wait_for_event', arguments: { timeout_ms: 1 } } });
const INGEST_BODY = JSON.stringify({ events: [{ type: 'call.started', account_id: 'acct_route_walk', data: {} }] });

describe('route guards: every route, every spelling', function () {
  this.timeout(60_000);
  let api: RunningApi;
  let base: string;
  let server: http.Server;
  let layers: Layer[];

  before(async () => {
    api = await startTestApi({ METRICS_TOKEN });
    const app = createApp(api.deps);
    layers = layersOf(app);
    // This copy of the app answers REACHED wherever a route's handler would have run.
    for (const layer of layers) {
      if (accessOf(layer.stack[0]) === 'mcp_tool_key') continue; // its guard is inside the handler, per JSON-RPC method
      layer.stack[layer.stack.length - 1] = (ctx) => {
        ctx.status = REACHED;
        ctx.body = { reached: layer.path };
      };
    }
    server = http.createServer(app.callback()).listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  after(() => new Promise<void>((r) => server.close(() => r())));

  it('finds the routes of every router and a guard as the first step of each', () => {
    expect(layers.length).to.be.greaterThan(20);
    const unguarded = layers.filter((l) => accessOf(l.stack[0]) === undefined).map((l) => `${l.methods.join(',')} ${l.path}`);
    expect(unguarded, 'routes registered without a guard').to.deep.equal([]);
    const guarded = new Set(layers.map((l) => accessOf(l.stack[0])));
    for (const access of ['account', 'ingest_token', 'metrics_token', 'stream_token', 'mcp_tool_key']) expect(guarded).to.include(access);
  });

  it('lets no spelling of a protected route reach its handler without a credential', async () => {
    const leaks: string[] = [];
    let tried = 0;
    for (const layer of layers) {
      const access = accessOf(layer.stack[0]);
      if (access === 'public' || access === undefined) continue;
      const methods = layer.methods.length > 10 ? ['GET', 'POST'] : layer.methods.filter((m) => m !== 'HEAD');
      for (const method of methods) {
        for (const path of spellings(concrete(layer.path))) {
          const body = method === 'GET' || method === 'DELETE' || method === 'OPTIONS' ? undefined : access === 'mcp_tool_key' ? MCP_TOOL_CALL : access === 'ingest_token' ? INGEST_BODY : '{}';
          const res = await request(base, method, path, body);
          tried++;
          const reached = res.status === REACHED || (access === 'mcp_tool_key' && res.text.includes('"result"'));
          if (reached || res.status < 400) leaks.push(`${method} ${path} (${access}) -> ${res.status}`);
        }
      }
    }
    expect(tried).to.be.greaterThan(200);
    expect(leaks, 'requests that got past a guard').to.deep.equal([]);
  });

  it('still reaches each public route by its own spelling (the sentinel works)', async () => {
    const publicGets = layers.filter((l) => accessOf(l.stack[0]) === 'public' && l.methods.includes('GET'));
    expect(publicGets.length).to.be.greaterThan(3);
    for (const layer of publicGets) {
      const res = await request(base, 'GET', concrete(layer.path));
      expect(res.status, layer.path).to.equal(REACHED);
    }
  });

  it('refuses POST /INTERNAL/v1/events without a token on the real app and writes nothing', async () => {
    const account = await createAccount(api.url, { withApiKey: false });
    const events = JSON.stringify({ events: [{ type: 'call.started', account_id: account.userId, data: { forged: true } }] });
    for (const path of ['/INTERNAL/v1/events', '/Internal/V1/Events/', '/internal/v1/events/', '/internal//v1/events', '/internal/v1/%65vents']) {
      const res = await request(api.url, 'POST', path, events);
      expect([401, 404], path).to.include(res.status);
    }
    // The one real spelling with the token still works, and only that event is in the log.
    const ok = await call(api.url, 'POST', '/internal/v1/events', { body: JSON.parse(events), headers: { authorization: `Bearer ${api.deps.config.ingestToken}` } });
    expect(ok.status).to.equal(202);
    const cursor = (ok.body as { events: { cursor: string }[] }).events[0]?.cursor;
    expect(cursor).to.be.a('string');
    let seen: unknown[] = [];
    for (let i = 0; i < 100 && seen.length === 0; i++) {
      const page = await call(api.url, 'GET', '/api/v1/events?limit=100', { headers: { authorization: `Bearer ${account.token}` } });
      seen = (page.body as { events: unknown[] }).events;
      if (seen.length === 0) await new Promise((r) => setTimeout(r, 100));
    }
    expect(seen).to.have.length(1);
  });

  it('guards /metrics in every spelling when a metrics token is set', async () => {
    for (const path of spellings('/metrics')) {
      const res = await request(api.url, 'GET', path);
      expect([401, 404], path).to.include(res.status);
    }
    const ok = await call(api.url, 'GET', '/metrics', { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
    expect(ok.status).to.equal(200);
  });
});
