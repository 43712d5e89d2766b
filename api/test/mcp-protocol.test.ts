import { expect } from 'chai';
import { createRateLimits } from '../src/features/limits/limiter.js';
import { MAX_BATCH, PROTOCOL_VERSIONS } from '../src/features/mcp/routes.js';
import type { RunningApi } from '../src/server.js';
import { bearer, createAccount, type TestAccount } from './support/accounts.js';
import { call, sharedApis } from './support/api.js';
import { MCP, rpc, rpcRaw, serveWith, toolCall } from './support/mcp.js';

const V = { 'mcp-protocol-version': '2025-06-18' };

describe('MCP over HTTP: lifecycle and discovery', () => {
  let base: string;

  before(async () => {
    const [a] = await sharedApis();
    base = a.url;
  });

  it('serves the protocol revisions of the SDK, 2025-11-25 first', () => {
    expect(PROTOCOL_VERSIONS[0]).to.equal('2025-11-25');
    expect(PROTOCOL_VERSIONS).to.include.members(['2025-11-25', '2025-06-18', '2025-03-26']);
  });

  for (const version of PROTOCOL_VERSIONS) {
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
    const res = await rpc(base, { jsonrpc: '2.0', id: 'init', method: 'initialize', params: { protocolVersion: '2024-01-01', capabilities: {}, clientInfo: { name: 't', version: '1' } } });
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
    // SDK 1.x alone would answer -32603 with its parser's dump (modelcontextprotocol/typescript-sdk#2284).
    const res = await rpc(base, { jsonrpc: '2.0', id: 7, method: 'initialize', params: { capabilities: {} } });
    expect(res.status).to.equal(200);
    expect(res.body).to.deep.include({ id: 7 });
    expect(res.body).to.not.have.property('result');
    expect(res.body.error.code).to.equal(-32602);
    expect(res.body.error.message).to.match(/protocolVersion/);
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
    expect(res.body.error.code).to.equal(-32000);
    expect(res.body.error.message).to.include('2025-11-25');
    // The SDK's refusals carry the API's error data too.
    expect(res.body.error.data).to.deep.equal({ code: 'bad_request', request_id: res.headers.get('x-request-id') });
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

  it('refuses JSON that is not a JSON-RPC message with 400 and a JSON-RPC error', async () => {
    const raws = ['42', '"ping"', '{"id":1,"method":"ping"}', '{"jsonrpc":"1.0","id":"abc","method":"ping"}', '{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}'];
    for (const raw of [...raws, '{"jsonrpc":"2.0","id":1,"method":"ping","params":"x"}', '{"jsonrpc":"2.0","id":10,"method":"tools/list","params":[1,2]}']) {
      const res = await rpcRaw(base, raw, V);
      expect(res.status, raw).to.equal(400);
      expect(res.body.jsonrpc, raw).to.equal('2.0');
      // The SDK answers these -32700 (it cannot read a JSON-RPC message); JSON-RPC itself would say -32600.
      expect(res.body.error.code, raw).to.be.oneOf([-32700, -32600]);
      expect(res.body, raw).to.not.have.property('result');
    }
  });

  it('answers an unknown method with -32601', async () => {
    const res = await rpc(base, { jsonrpc: '2.0', id: 9, method: 'resources/list' }, V);
    expect(res.status).to.equal(200);
    expect(res.body).to.deep.include({ jsonrpc: '2.0', id: 9 });
    expect(res.body.error.code).to.equal(-32601);
  });

  it('answers a method named like a property every object has (constructor, __proto__, toString) with -32601, not a 500', async () => {
    for (const method of ['constructor', '__proto__', 'toString', 'hasOwnProperty']) {
      const res = await rpc(base, { jsonrpc: '2.0', id: 'x', method, params: { name: 'whoami', arguments: {} } }, V);
      expect(res.status, method).to.equal(200);
      expect(res.body, method).to.deep.include({ jsonrpc: '2.0', id: 'x' });
      expect(res.body.error.code, method).to.equal(-32601);
    }
  });

  it('answers a batch with one response per request, in order, skipping notifications', async () => {
    const res = await rpc(
      base,
      [
        { jsonrpc: '2.0', id: 1, method: 'ping' },
        { jsonrpc: '2.0', method: 'notifications/initialized' },
        { jsonrpc: '2.0', id: 2, method: 'no/such/method' },
        { jsonrpc: '2.0', id: 3, method: 'tools/list' },
      ],
      { 'mcp-protocol-version': '2025-03-26' },
    );
    expect(res.status).to.equal(200);
    expect(res.body).to.be.an('array').with.length(3);
    expect(res.body[0]).to.deep.equal({ jsonrpc: '2.0', id: 1, result: {} });
    expect(res.body[1]).to.deep.include({ id: 2 });
    expect(res.body[1].error.code).to.equal(-32601);
    expect(res.body[2].id).to.equal(3);
    expect(res.body[2].result.tools).to.be.an('array').with.length.above(0);
  });

  it('refuses a whole batch that holds a message that is not JSON-RPC, or an initialize', async () => {
    for (const odd of [{ foo: 'bar' }, { jsonrpc: '2.0', id: 4, method: 'initialize', params: { protocolVersion: '2025-03-26', capabilities: {}, clientInfo: { name: 't', version: '1' } } }]) {
      const res = await rpc(base, [{ jsonrpc: '2.0', id: 1, method: 'ping' }, odd], { 'mcp-protocol-version': '2025-03-26' });
      expect(res.status, JSON.stringify(odd)).to.equal(400);
      expect(res.body, JSON.stringify(odd)).to.not.be.an('array');
      expect(res.body.error.code, JSON.stringify(odd)).to.be.oneOf([-32700, -32600]);
    }
  });

  it('accepts a batch of notifications only (or an empty one: nothing to answer) with 202 and no body', async () => {
    for (const batch of [[{ jsonrpc: '2.0', method: 'notifications/initialized' }, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1 } }], []]) {
      const res = await rpc(base, batch, V);
      expect(res.status, JSON.stringify(batch)).to.equal(202);
      expect(res.body).to.equal(null);
    }
  });

  it('answers a request that a notifications/cancelled in the same POST names (a POST is never left unanswered)', async () => {
    const res = await rpc(base, [{ jsonrpc: '2.0', id: 1, method: 'ping' }, { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1 } }], V);
    expect(res.status).to.equal(200);
    // SDK 1.x answers a batch holding one request with that response alone, not an array of one.
    expect([res.body].flat()).to.deep.equal([{ jsonrpc: '2.0', id: 1, result: {} }]);
  });

  it('accepts a JSON-RPC response from the client with 202', async () => {
    const res = await rpc(base, { jsonrpc: '2.0', id: 'srv-1', result: {} }, V);
    expect(res.status).to.equal(202);
  });

  it(`refuses a batch over ${MAX_BATCH} messages`, async () => {
    const batch = Array.from({ length: MAX_BATCH + 1 }, (_, i) => ({ jsonrpc: '2.0', id: i, method: 'ping' }));
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
    expect(res.body.error.data).to.deep.equal({ code: 'unsupported_media_type', request_id: res.headers.get('x-request-id') });
  });

  it('refuses a compressed body with 415 (it is not inflated)', async () => {
    const res = await rpcRaw(base, '{"jsonrpc":"2.0","id":1,"method":"ping"}', { ...V, 'content-encoding': 'gzip' });
    expect(res.status).to.equal(415);
    expect(res.body.error.data.code).to.equal('unsupported_media_type');
  });

  it('refuses a client that accepts only text/event-stream with 406', async () => {
    const res = await rpc(base, { jsonrpc: '2.0', id: 1, method: 'ping' }, { ...V, accept: 'text/event-stream' });
    expect(res.status).to.equal(406);
    expect(res.body.error.data).to.deep.equal({ code: 'not_acceptable', request_id: res.headers.get('x-request-id') });
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

  it('serves /api/mcp with or without one trailing slash, and no case variant (routes are case-sensitive)', async () => {
    for (const path of ['/API/MCP', '/Api/Mcp', '/api/MCP/']) {
      const res = await call(base, 'POST', path, { body: { jsonrpc: '2.0', id: 1, method: 'ping' } });
      expect(res.status, path).to.equal(404);
    }
    const slash = await call(base, 'POST', '/api/mcp/', { body: { jsonrpc: '2.0', id: 1, method: 'ping' } });
    expect(slash.status).to.equal(200);
    expect(slash.body).to.deep.include({ jsonrpc: '2.0', id: 1 });
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
    allowedBase = await serveWith(a, (deps) => ({ ...deps, config: { ...deps.config, mcp: { allowedOrigins: [allowed] } } }));
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

describe('MCP over HTTP: tools/call credentials and errors', () => {
  let base: string;
  let api: RunningApi;
  let acct: TestAccount;

  before(async () => {
    [api] = await sharedApis();
    base = api.url;
    acct = await createAccount(base);
  });

  it('refuses tools/call without credentials: 401, WWW-Authenticate: Bearer, JSON-RPC error with the id', async () => {
    const res = await rpc(base, toolCall(11, 'whoami'), V);
    expect(res.status).to.equal(401);
    expect(res.headers.get('www-authenticate')).to.match(/^Bearer/);
    expect(res.body).to.deep.include({ jsonrpc: '2.0', id: 11 });
    expect(res.body.error.code).to.equal(-32000);
    expect(res.body.error.data.code).to.equal('unauthorized');
    expect(res.body.error.message).to.match(/API key/);
  });

  it('refuses a session token for tools/call, while it would open the REST API', async () => {
    const res = await rpc(base, toolCall(12, 'whoami'), { ...V, ...bearer(acct.token) });
    expect(res.status).to.equal(401);
    expect(res.headers.get('www-authenticate')).to.match(/^Bearer/);
    expect(res.body.error.message).to.match(/not a session token/);
  });

  it('refuses an unknown or malformed key', async () => {
    for (const key of [`svc_${'A'.repeat(43)}`, 'svc_short']) {
      const res = await rpc(base, toolCall(13, 'whoami'), { ...V, ...bearer(key) });
      expect(res.status, key).to.equal(401);
    }
  });

  it('refuses the whole batch when it holds a tools/call and no key', async () => {
    const res = await rpc(base, [{ jsonrpc: '2.0', id: 1, method: 'ping' }, toolCall(2, 'whoami')], V);
    expect(res.status).to.equal(401);
    expect(res.body).to.not.have.property('id');
  });

  it('runs a tool with the key as Bearer or X-API-Key: text content plus structuredContent', async () => {
    for (const headers of [bearer(acct.apiKey), { 'x-api-key': acct.apiKey }]) {
      const res = await rpc(base, toolCall(14, 'whoami', {}), { ...V, ...headers });
      expect(res.status, JSON.stringify(res.body)).to.equal(200);
      const result = res.body.result;
      expect(result.isError).to.equal(false);
      expect(result.structuredContent.account_id).to.equal(acct.userId);
      expect(result.structuredContent.user).to.include({ id: acct.userId, email: acct.email });
      expect(JSON.parse(result.content[0].text)).to.deep.equal(result.structuredContent);
    }
  });

  it('leaves structuredContent out for a 2025-03-26 client (text content only)', async () => {
    const res = await rpc(base, toolCall(15, 'whoami'), bearer(acct.apiKey));
    expect(res.status).to.equal(200);
    expect(res.body.result).to.not.have.property('structuredContent');
    expect(JSON.parse(res.body.result.content[0].text).account_id).to.equal(acct.userId);
  });

  it('answers an unknown tool with -32602', async () => {
    const res = await rpc(base, toolCall(16, 'rm_rf'), { ...V, ...bearer(acct.apiKey) });
    expect(res.status).to.equal(200);
    expect(res.body.id).to.equal(16);
    expect(res.body.error.code).to.equal(-32602);
    expect(res.body.error.message).to.match(/Unknown tool: rm_rf/);
    expect(res.body.error.data.available).to.include('wait_for_event');
  });

  it('answers a tools/call without a tool name, or with arguments that are not an object, with -32602', async () => {
    for (const params of [{}, { name: 'whoami', arguments: [1] }, { name: 7 }, { name: 'wait_for_event', arguments: '' }]) {
      const res = await rpc(base, { jsonrpc: '2.0', id: 17, method: 'tools/call', params }, { ...V, ...bearer(acct.apiKey) });
      expect(res.body, JSON.stringify(params)).to.not.have.property('result');
      expect(res.body.error.code, JSON.stringify(params)).to.equal(-32602);
    }
  });

  it('answers bad arguments with -32602 listing every bad field (2025-06-18 and 2025-03-26)', async () => {
    for (const version of ['2025-06-18', '2025-03-26']) {
      const args = { timeout_ms: 60_000, types: ['call.exploded'], extra: true };
      const res = await rpc(base, toolCall(18, 'wait_for_event', args), { 'mcp-protocol-version': version, ...bearer(acct.apiKey) });
      expect(res.status).to.equal(200);
      expect(res.body.id).to.equal(18);
      expect(res.body.error.code, version).to.equal(-32602);
      const paths = res.body.error.data.details.map((d: { path: string }) => d.path);
      expect(paths).to.include.members(['timeout_ms', 'types.0', 'extra']);
    }
  });

  it('answers bad arguments with an isError result under 2025-11-25, so the model can correct itself', async () => {
    const res = await rpc(base, toolCall(19, 'wait_for_event', { timeout_ms: 'soon' }), { 'mcp-protocol-version': '2025-11-25', ...bearer(acct.apiKey) });
    expect(res.status).to.equal(200);
    expect(res.body.result.isError).to.equal(true);
    expect(res.body.result.content[0].text).to.match(/Invalid arguments for tool wait_for_event/).and.match(/timeout_ms: must be integer/);
    expect(res.body.result).to.not.have.property('structuredContent');
  });

  it('counts every tools/call against the key: over the limit the POST gets 429 with Retry-After', async () => {
    const limited = await serveWith(api, (deps) => ({
      ...deps,
      limits: createRateLimits({ ...deps.config, limits: { ...deps.config.limits, apiKeyPerMinute: 3 } }, deps.mongo, deps.log),
    }));
    const own = await createAccount(base);
    const headers = { ...V, ...bearer(own.apiKey) };
    // Limit windows are aligned to the clock: keep the three calls inside one minute.
    const left = 60_000 - (Date.now() % 60_000);
    if (left < 5000) await new Promise((r) => setTimeout(r, left + 50));
    const first = await rpc(limited, [toolCall(1, 'whoami'), toolCall(2, 'whoami')], headers);
    expect(first.status).to.equal(200);
    expect(first.body).to.have.length(2);
    const second = await rpc(limited, [toolCall(3, 'whoami'), toolCall(4, 'whoami')], headers);
    expect(second.status).to.equal(429);
    expect(Number(second.headers.get('retry-after'))).to.be.within(1, 60);
    expect(second.body.error.data.code).to.equal('rate_limited');
    // Discovery needs no key and is not charged to it.
    const list = await rpc(limited, { jsonrpc: '2.0', id: 5, method: 'tools/list' }, headers);
    expect(list.status).to.equal(200);
  });
});
