import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { createApp } from '../src/app.js';
import type { RunningApi } from '../src/server.js';
import { atRunEnd } from '../../shared/test/support/cleanup.js';
import { call, sharedApis, type JsonResponse } from './support/api.js';

const MCP = '/api/mcp';
const JSON_AND_SSE = 'application/json, text/event-stream';

/** A raw JSON-RPC POST as an MCP client sends it. */
function rpc(base: string, body: unknown, headers: Record<string, string> = {}): Promise<JsonResponse> {
  return call(base, 'POST', MCP, { body, headers: { accept: JSON_AND_SSE, ...headers } });
}

function rpcRaw(base: string, raw: string, headers: Record<string, string> = {}): Promise<JsonResponse> {
  return call(base, 'POST', MCP, { raw, headers: { accept: JSON_AND_SSE, ...headers } });
}

const V = { 'mcp-protocol-version': '2025-06-18' };

describe('MCP over HTTP: lifecycle and discovery', () => {
  let base: string;

  before(async () => {
    const [a] = await sharedApis();
    base = a.url;
  });

  for (const version of ['2025-11-25', '2025-06-18', '2025-03-26']) {
    it(`initialize echoes the supported version ${version}`, async () => {
      const res = await rpc(base, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 't', version: '1' } } });
      expect(res.status).to.equal(200);
      expect(res.headers.get('content-type')).to.match(/^application\/json/);
      expect(res.body).to.include({ jsonrpc: '2.0', id: 1 });
      expect(res.body.result.protocolVersion).to.equal(version);
      expect(res.body.result.capabilities).to.deep.equal({ tools: { listChanged: false } });
      expect(res.body.result.serverInfo).to.include({ name: 'event-platform', version: '0.1.0' });
      expect(res.body.result.instructions).to.be.a('string').and.match(/wait_for_event/);
      // Stateless server: no session to carry.
      expect(res.headers.get('mcp-session-id')).to.equal(null);
    });
  }

  it('initialize answers an unsupported client version with our latest', async () => {
    const res = await rpc(base, { jsonrpc: '2.0', id: 'init', method: 'initialize', params: { protocolVersion: '2024-11-05', capabilities: {}, clientInfo: { name: 't', version: '1' } } });
    expect(res.status).to.equal(200);
    expect(res.body.id).to.equal('init');
    expect(res.body.result.protocolVersion).to.equal('2025-11-25');
  });

  it('initialize ignores a stale MCP-Protocol-Version header (it negotiates from params)', async () => {
    const res = await rpc(base, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } }, { 'mcp-protocol-version': '1999-01-01' });
    expect(res.status).to.equal(200);
    expect(res.body.result.protocolVersion).to.equal('2025-06-18');
  });

  it('initialize without a protocolVersion is invalid params (-32602)', async () => {
    const res = await rpc(base, { jsonrpc: '2.0', id: 7, method: 'initialize', params: { capabilities: {} } });
    expect(res.status).to.equal(200);
    expect(res.body).to.deep.include({ id: 7 });
    expect(res.body.error.code).to.equal(-32602);
  });

  it('accepts notifications/initialized with 202 and no body', async () => {
    const res = await rpc(base, { jsonrpc: '2.0', method: 'notifications/initialized' }, V);
    expect(res.status).to.equal(202);
    expect(res.body).to.equal(null);
  });

  it('answers ping with an empty result', async () => {
    const res = await rpc(base, { jsonrpc: '2.0', id: 3, method: 'ping' }, V);
    expect(res.status).to.equal(200);
    expect(res.body).to.deep.equal({ jsonrpc: '2.0', id: 3, result: {} });
  });

  it('lists every tool with a description and an object inputSchema, without credentials', async () => {
    const res = await rpc(base, { jsonrpc: '2.0', id: 4, method: 'tools/list' }, { 'mcp-protocol-version': '2025-11-25' });
    expect(res.status).to.equal(200);
    const tools = res.body.result.tools as Array<Record<string, any>>;
    expect(tools.map((t) => t.name)).to.include('whoami');
    for (const t of tools) {
      expect(t.name).to.match(/^[a-z_]+$/);
      expect(t.description).to.be.a('string').with.length.above(20);
      expect(t.inputSchema.type).to.equal('object');
      expect(t.outputSchema.type).to.equal('object');
      expect(t.title).to.be.a('string');
    }
  });

  it('speaks 2025-03-26 to a client that sends no MCP-Protocol-Version: no outputSchema or title', async () => {
    const res = await rpc(base, { jsonrpc: '2.0', id: 5, method: 'tools/list' });
    expect(res.status).to.equal(200);
    for (const t of res.body.result.tools) {
      expect(t).to.have.property('inputSchema');
      expect(t).to.not.have.property('outputSchema');
      expect(t).to.not.have.property('title');
    }
  });

  it('refuses an unsupported MCP-Protocol-Version with 400', async () => {
    const res = await rpc(base, { jsonrpc: '2.0', id: 6, method: 'tools/list' }, { 'mcp-protocol-version': '2099-01-01' });
    expect(res.status).to.equal(400);
    expect(res.body.id).to.equal(6);
    expect(res.body.error.code).to.equal(-32000);
    expect(res.body.error.data.supported).to.deep.equal(['2025-11-25', '2025-06-18', '2025-03-26']);
  });
});

describe('MCP over HTTP: JSON-RPC edge cases', () => {
  let base: string;

  before(async () => {
    const [a] = await sharedApis();
    base = a.url;
  });

  it('answers malformed JSON with a parse error (-32700) and no id', async () => {
    const res = await rpcRaw(base, '{"jsonrpc":"2.0","id":1,"method":', V);
    expect(res.status).to.equal(400);
    expect(res.body.jsonrpc).to.equal('2.0');
    expect(res.body.error.code).to.equal(-32700);
    expect(res.body).to.not.have.property('id');
    expect(res.body.error.data.request_id).to.equal(res.headers.get('x-request-id'));
  });

  it('answers an empty body with a parse error', async () => {
    const res = await rpcRaw(base, '', V);
    expect(res.status).to.equal(400);
    expect(res.body.error.code).to.equal(-32700);
  });

  it('answers JSON that is not a JSON-RPC message with invalid request (-32600)', async () => {
    for (const raw of ['42', '"ping"', '{"id":1,"method":"ping"}', '{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}', '{"jsonrpc":"2.0","id":1,"method":"ping","params":"x"}']) {
      const res = await rpcRaw(base, raw, V);
      expect(res.status, raw).to.equal(400);
      expect(res.body.error.code, raw).to.equal(-32600);
    }
  });

  it('keeps the id of an invalid request when it can be read', async () => {
    const res = await rpc(base, { jsonrpc: '1.0', id: 'abc', method: 'ping' }, V);
    expect(res.status).to.equal(400);
    expect(res.body.id).to.equal('abc');
    expect(res.body.error.code).to.equal(-32600);
  });

  it('answers an unknown method with -32601', async () => {
    const res = await rpc(base, { jsonrpc: '2.0', id: 9, method: 'resources/list' }, V);
    expect(res.status).to.equal(200);
    expect(res.body).to.deep.include({ jsonrpc: '2.0', id: 9 });
    expect(res.body.error.code).to.equal(-32601);
    expect(res.body.error.message).to.match(/resources\/list/);
  });

  it('answers params that are not an object with -32602', async () => {
    const res = await rpc(base, { jsonrpc: '2.0', id: 10, method: 'tools/list', params: [1, 2] }, V);
    expect(res.status).to.equal(200);
    expect(res.body.error.code).to.equal(-32602);
  });

  it('answers a batch with one response per request, in order, skipping notifications', async () => {
    const res = await rpc(
      base,
      [
        { jsonrpc: '2.0', id: 1, method: 'ping' },
        { jsonrpc: '2.0', method: 'notifications/initialized' },
        { jsonrpc: '2.0', id: 2, method: 'no/such/method' },
        { foo: 'bar' },
        { jsonrpc: '2.0', id: 3, method: 'tools/list' },
        { jsonrpc: '2.0', id: 4, method: 'initialize', params: { protocolVersion: '2025-03-26' } },
      ],
      { 'mcp-protocol-version': '2025-03-26' },
    );
    expect(res.status).to.equal(200);
    expect(res.body).to.be.an('array').with.length(5);
    expect(res.body[0]).to.deep.equal({ jsonrpc: '2.0', id: 1, result: {} });
    expect(res.body[1]).to.deep.include({ id: 2 });
    expect(res.body[1].error.code).to.equal(-32601);
    expect(res.body[2]).to.not.have.property('id');
    expect(res.body[2].error.code).to.equal(-32600);
    expect(res.body[3].id).to.equal(3);
    expect(res.body[3].result.tools).to.be.an('array').with.length.above(0);
    // initialize must be alone in its POST.
    expect(res.body[4].id).to.equal(4);
    expect(res.body[4].error.code).to.equal(-32600);
  });

  it('accepts a batch of notifications only with 202 and no body', async () => {
    const res = await rpc(base, [{ jsonrpc: '2.0', method: 'notifications/initialized' }, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1 } }], V);
    expect(res.status).to.equal(202);
    expect(res.body).to.equal(null);
  });

  it('accepts a JSON-RPC response from the client with 202', async () => {
    const res = await rpc(base, { jsonrpc: '2.0', id: 'srv-1', result: {} }, V);
    expect(res.status).to.equal(202);
  });

  it('refuses an empty batch with -32600', async () => {
    const res = await rpc(base, [], V);
    expect(res.status).to.equal(400);
    expect(res.body.error.code).to.equal(-32600);
  });

  it('refuses a batch over 50 messages', async () => {
    const batch = Array.from({ length: 51 }, (_, i) => ({ jsonrpc: '2.0', id: i, method: 'ping' }));
    const res = await rpc(base, batch, V);
    expect(res.status).to.equal(400);
    expect(res.body.error.code).to.equal(-32600);
  });

  it('refuses a body over the limit with 413', async () => {
    const res = await rpc(base, { jsonrpc: '2.0', id: 1, method: 'ping', params: { pad: 'x'.repeat(1_100_000) } }, V);
    expect(res.status).to.equal(413);
    expect(res.body.error.data.code).to.equal('payload_too_large');
  });

  it('refuses a body that is not application/json with 415', async () => {
    const res = await rpcRaw(base, '{"jsonrpc":"2.0","id":1,"method":"ping"}', { ...V, 'content-type': 'text/plain' });
    expect(res.status).to.equal(415);
    expect(res.body.error.code).to.equal(-32000);
  });

  it('refuses a client that accepts only text/event-stream with 406', async () => {
    const res = await rpc(base, { jsonrpc: '2.0', id: 1, method: 'ping' }, { ...V, accept: 'text/event-stream' });
    expect(res.status).to.equal(406);
  });

  it('answers a client that sends no Accept header', async () => {
    const res = await fetch(base + MCP, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }) });
    expect(res.status).to.equal(200);
    expect(await res.json()).to.deep.equal({ jsonrpc: '2.0', id: 1, result: {} });
  });

  it('answers GET with 405 and Allow: POST (no server-initiated stream)', async () => {
    const res = await call(base, 'GET', MCP, { headers: { accept: 'text/event-stream' } });
    expect(res.status).to.equal(405);
    expect(res.headers.get('allow')).to.match(/POST/);
    expect(res.body.error.code).to.equal(-32000);
  });

  it('answers DELETE with 405 (no sessions to end)', async () => {
    const res = await call(base, 'DELETE', MCP, { headers: { 'mcp-session-id': 'x' } });
    expect(res.status).to.equal(405);
    expect(res.headers.get('allow')).to.match(/POST/);
  });
});

describe('MCP over HTTP: Origin validation', () => {
  let base: string;
  let allowedBase: string;
  const allowed = 'https://agent.example.com';

  before(async () => {
    const [a] = await sharedApis();
    base = a.url;
    allowedBase = await serveWithOrigins(a, [allowed]);
  });

  it('refuses a foreign Origin with 403 and a JSON-RPC error body', async () => {
    const res = await rpc(base, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18' } }, { origin: 'http://evil.example' });
    expect(res.status).to.equal(403);
    expect(res.body.jsonrpc).to.equal('2.0');
    expect(res.body.error.code).to.equal(-32000);
    expect(res.body.error.data.code).to.equal('forbidden');
  });

  it('does not trust an Origin just because it matches the Host (DNS rebinding)', async () => {
    const res = await rpc(base, { jsonrpc: '2.0', id: 1, method: 'ping' }, { ...V, origin: base });
    expect(res.status).to.equal(403);
  });

  it('refuses a foreign Origin on GET too', async () => {
    const res = await call(base, 'GET', MCP, { headers: { origin: 'http://evil.example' } });
    expect(res.status).to.equal(403);
  });

  it('lets an Origin on MCP_ALLOWED_ORIGINS through, with CORS headers', async () => {
    const res = await rpc(allowedBase, { jsonrpc: '2.0', id: 1, method: 'ping' }, { ...V, origin: allowed });
    expect(res.status).to.equal(200);
    expect(res.headers.get('access-control-allow-origin')).to.equal(allowed);
    expect(res.headers.get('vary')).to.match(/Origin/i);
    const foreign = await rpc(allowedBase, { jsonrpc: '2.0', id: 1, method: 'ping' }, { ...V, origin: 'https://other.example.com' });
    expect(foreign.status).to.equal(403);
  });

  it('answers a CORS preflight from an allowed Origin', async () => {
    const res = await fetch(allowedBase + MCP, {
      method: 'OPTIONS',
      headers: { origin: allowed, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type, mcp-protocol-version' },
    });
    expect(res.status).to.equal(204);
    expect(res.headers.get('access-control-allow-origin')).to.equal(allowed);
    expect(res.headers.get('access-control-allow-methods')).to.match(/POST/);
    expect(res.headers.get('access-control-allow-headers')).to.match(/Authorization/).and.match(/MCP-Protocol-Version/);
  });
});

/** The running app again, with a different allow-list, on its own port (no second set of consumers). */
async function serveWithOrigins(api: RunningApi, origins: string[]): Promise<string> {
  const app = createApp({ ...api.deps, config: { ...api.deps.config, mcp: { ...api.deps.config.mcp, allowedOrigins: origins } } });
  const server = http.createServer(app.callback());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  atRunEnd(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}
