/**
 * Hostile input to MCP (/api/mcp): tool arguments of any shape and depth,
 * the credential matrix for tools/call, another account's cursors and ids
 * through the tools, and wait_for_event calls abandoned at any moment.
 */
import net from 'node:net';
import { expect } from 'chai';
import fc from 'fast-check';
import type { RunningApi } from '../../src/server.js';
import { bearer, createAccount, type TestAccount } from '../support/accounts.js';
import { sharedApis } from '../support/api.js';
import { hostileJson } from './support/arbitraries.js';
import { badCredentials, type BadCredential } from './support/credentials.js';
import { createWebhook, ingestOne, mintStreamToken } from './support/fixtures.js';
import { fuzz } from './support/fuzz.js';
import { answer, describeRequest, send, type HostileAnswer } from './support/http.js';
import { assertSafe } from './support/oracle.js';
import { record } from './support/tally.js';
import { dropHostileWebhooks } from './support/webhook-cleanup.js';

const MCP = '/api/mcp';
let nextId = 1;

function toolCall(name: string, args: unknown, headers: Record<string, string>): { method: string; path: string; headers: Record<string, string>; body: string } {
  return { method: 'POST', path: MCP, headers: { ...headers, accept: 'application/json, text/event-stream' }, body: JSON.stringify({ jsonrpc: '2.0', id: nextId++, method: 'tools/call', params: { name, arguments: args } }) };
}

describe('hostile: MCP', function () {
  this.timeout(120_000);
  let apis: [RunningApi, RunningApi];
  let acct: TestAccount;
  let tools: { name: string; inputSchema: { properties?: Record<string, unknown> } }[];

  after(async () => {
    await dropHostileWebhooks(apis[0]);
  });

  before(async () => {
    apis = await sharedApis();
    acct = await createAccount(apis[0].url);
    const list = await answer(apis[0].url, { method: 'POST', path: MCP, headers: { accept: 'application/json' }, body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'tools/list' }) });
    tools = list.json.result.tools;
  });

  it('answers tools/call with arguments of any shape safely, for every tool', async () => {
    const names = tools.map((t) => t.name);
    const fields = [...new Set(tools.flatMap((t) => Object.keys(t.inputSchema.properties ?? {})))];
    const args = fc.oneof(
      hostileJson(4),
      fc.dictionary(fc.constantFrom(...fields, '__proto__', 'extra'), fc.oneof(hostileJson(3), fc.integer({ min: 0, max: 50 })), { maxKeys: 4 }),
    );
    await fuzz('MCP tool arguments', 200, fc.tuple(fc.constantFrom(...names), args, fc.constantFrom('2025-11-25', '2025-06-18', '2025-03-26')), async ([name, a, version]) => {
      const req = toolCall(name, a, { ...bearer(acct.apiKey), 'mcp-protocol-version': version });
      const res = await send(apis[nextId % 2]!.url, { ...req, timeoutMs: 1000 });
      if (res) assertSafe(res, describeRequest(req), { jsonRpc: true });
    });
  });

  it('answers arguments nested 200,000 deep with a refusal, not an internal error', async () => {
    // Arrays: two bytes a level, so 200,000 levels fit well within the 1 MB body limit.
    const depth = 200_000;
    const deep = '['.repeat(depth) + ']'.repeat(depth);
    let n = 0;
    for (const { name } of tools) {
      const body = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"${name}","arguments":{"since":${deep}}}}`;
      const res = await answer(apis[0].url, { method: 'POST', path: MCP, headers: { ...bearer(acct.apiKey), accept: 'application/json' }, body, timeoutMs: 10_000 });
      assertSafe(res, `${name} with deep arguments`, { jsonRpc: true });
      n += 1;
    }
    record('limits', 'MCP arguments nested 200,000 deep', n);
  });

  it('refuses every bad credential on tools/call with 401, a session token included', async () => {
    const { victim, creds } = await badCredentials(apis[0], (v) => mintStreamToken(apis[0], v.apiKey));
    const all: BadCredential[] = [...creds, { label: 'valid session token (tools/call takes API keys only)', headers: bearer(victim.token) }];
    let n = 0;
    for (const cred of all) {
      const req = toolCall('whoami', {}, cred.headers);
      const res = await answer(apis[n % 2]!.url, req);
      const what = `${cred.label}: ${describeRequest(req)}`;
      assertSafe(res, what, { jsonRpc: true });
      expect(res.status, `${what} -> ${res.text.slice(0, 200)}`).to.equal(401);
      expect(res.json.error.data.code, what).to.equal('unauthorized');
      expect(res.headers.get('www-authenticate'), what).to.equal('Bearer');
      n += 1;
    }
    record('credentials', 'POST /api/mcp tools/call', n);
  });

  it("never gives B A's events or A's subscriptions through the tools", async () => {
    const a = await createAccount(apis[0].url);
    const b = await createAccount(apis[1].url);
    const marker = `mcp-owned-by-${a.userId}`;
    const event = await ingestOne(apis[0], a.userId, { marker });
    const hook = await createWebhook(apis[0], a, marker);
    const byName = new Set(tools.map((t) => t.name));
    const calls: [string, unknown][] = [
      ['list_events', { since: event.cursor }],
      ['wait_for_event', { since: event.cursor, timeout_ms: 300 }],
      ['list_webhooks', {}],
      ['delete_webhook', { id: hook.id }],
      ['ping_webhook', { id: hook.id }],
      ['rotate_webhook_secret', { id: hook.id, grace_period_s: 0 }],
      ['get_webhook', { id: hook.id }],
      ['get_webhook_stats', { id: hook.id }],
      ['get_event_deliveries', { event_id: event.id }],
      ['search_deliveries', { webhook_id: hook.id }],
      ['resend_delivery', { id: hook.id, delivery_id: `dlv_${'0'.repeat(24)}` }],
      ['recover_webhook_deliveries', { id: hook.id, since: new Date(Date.now() - 60_000).toISOString() }],
      ['replay_events_to_webhook', { id: hook.id, since: event.cursor }],
    ].filter(([name]) => byName.has(name as string)) as [string, unknown][];
    for (const [name, args] of calls) {
      const req = toolCall(name, args, bearer(b.apiKey));
      const res: HostileAnswer = await answer(apis[1].url, { ...req, timeoutMs: 10_000 });
      assertSafe(res, describeRequest(req), { jsonRpc: true });
      for (const secret of [marker, event.id, hook.id, hook.secret]) {
        if (name.endsWith('_webhook') && secret === hook.id) continue; // the refusal may echo the id it was given
        expect(res.text, `${name} leaked ${secret}`).to.not.include(secret);
      }
    }
    const still = await answer(apis[0].url, { method: 'GET', path: `/api/v1/webhooks/${hook.id}`, headers: bearer(a.apiKey) });
    expect(still.status, "A's subscription survives B's delete_webhook").to.equal(200);
    const secret = await answer(apis[0].url, { method: 'POST', path: `/api/v1/webhooks/${hook.id}/secret`, headers: bearer(a.apiKey) });
    expect(JSON.parse(secret.text).secret, "A's secret survives B's rotate_webhook_secret").to.equal(hook.secret);
    record('cross_account', 'POST /api/mcp tools', calls.length);
  });

  it('releases the waiter of every wait_for_event abandoned at any moment', async () => {
    const target = apis[1];
    const { registry } = target.deps.events;
    const baseline = registry.size;
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'wait_for_event', arguments: { timeout_ms: 55_000 } } });
    const request = `POST ${MCP} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${acct.apiKey}\r\nAccept: application/json\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
    const url = new URL(target.url);
    const total = 200;
    const sockets = await Promise.all(
      Array.from({ length: total }, () => new Promise<net.Socket>((resolve, reject) => {
        const s = net.connect({ host: url.hostname, port: Number(url.port) }, () => resolve(s));
        s.on('error', reject);
      })),
    );
    for (const s of sockets) s.write(request);
    await Promise.all(sockets.map((s) => new Promise<void>((resolve) => setTimeout(() => resolve(void s.destroy()), Math.random() * 1500))));
    // Let every request that was already read finish authenticating (some register after their client left).
    let last = registry.size;
    let stableSince = Date.now();
    while (Date.now() - stableSince < 2000) {
      await new Promise((r) => setTimeout(r, 100));
      if (registry.size !== last) [last, stableSince] = [registry.size, Date.now()];
    }
    const deadline = Date.now() + 10_000;
    while (registry.size !== baseline) {
      if (Date.now() > deadline) throw new Error(`${registry.size - baseline} waiters of departed MCP clients remain 10 s later`);
      await new Promise((r) => setTimeout(r, 50));
    }
    record('limits', 'MCP waits opened and abandoned', total);
  });
});
