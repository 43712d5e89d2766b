import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { expect } from 'chai';
import { encodeCursor } from '#shared/cursor.js';
import type { RunningApi } from '../src/server.js';
import { bearer, createAccount, type TestAccount } from './support/accounts.js';
import { call, sharedApis } from './support/api.js';
import { eventually, ingest, sleep } from './support/events.js';
import { connectClient } from './support/mcp.js';

const TOOL_NAMES = ['wait_for_event', 'list_events', 'list_event_types', 'list_webhooks', 'create_webhook', 'update_webhook', 'rotate_webhook_secret', 'delete_webhook', 'ping_webhook', 'resend_delivery', 'recover_webhook_deliveries', 'replay_events_to_webhook', 'get_webhook_stats', 'get_event_deliveries', 'search_deliveries', 'whoami'];

async function expectHttpStatus(promise: Promise<unknown>, status: number): Promise<void> {
  try {
    await promise;
  } catch (err) {
    expect(err, String(err)).to.be.instanceOf(StreamableHTTPError);
    expect((err as StreamableHTTPError).code).to.equal(status);
    return;
  }
  expect.fail(`expected HTTP ${status}`);
}

/** A tool result's structured content, after checking it is a success and that the text block says the same. */
function structured(result: Awaited<ReturnType<Client['callTool']>>): any {
  expect(result.isError, JSON.stringify(result.content)).to.not.equal(true);
  const content = result.content as Array<{ type: string; text: string }>;
  expect(content[0]!.type).to.equal('text');
  expect(JSON.parse(content[0]!.text)).to.deep.equal(result.structuredContent);
  return result.structuredContent;
}

describe('MCP with the official SDK client', function () {
  this.timeout(60_000);
  let api: RunningApi;
  let acct: TestAccount;
  const clients: Client[] = [];

  before(async () => {
    [api] = await sharedApis();
  });

  beforeEach(async () => {
    acct = await createAccount(api.url);
  });

  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close()));
  });

  /** A connected client that has listed the tools, so it checks every structuredContent against its outputSchema. */
  async function client(headers: Record<string, string> = {}): Promise<Client> {
    const c = await connectClient(api.url, headers);
    clients.push(c);
    await c.listTools();
    return c;
  }

  /** Resolves once this process holds a live waiter for the account, so later events reach it live. */
  const waiterRegistered = (accountId: string) => eventually(async () => (api.deps.events.registry.hasAccount(accountId) ? true : undefined), 10_000, 5);

  it('connects without credentials; ping and tools/list work', async () => {
    const c = await client();
    expect(c.getServerVersion()).to.include({ name: 'event-platform' });
    expect(c.getServerCapabilities()).to.deep.equal({ tools: { listChanged: false } });
    expect(c.getInstructions()).to.match(/wait_for_event/);
    expect(await c.ping()).to.deep.equal({});
    const { tools } = await c.listTools();
    expect(tools.map((t) => t.name)).to.have.members(TOOL_NAMES);
    const wait = tools.find((t) => t.name === 'wait_for_event')!;
    expect(wait.inputSchema.properties).to.have.keys('types', 'timeout_ms', 'since');
    expect((wait.inputSchema.properties as any).timeout_ms.maximum).to.equal(55_000);
  });

  it('refuses tools/call without a key (HTTP 401) while discovery keeps working', async () => {
    const c = await client();
    await expectHttpStatus(c.callTool({ name: 'whoami', arguments: {} }), 401);
    expect(await c.ping()).to.deep.equal({});
    expect((await c.listTools()).tools).to.have.length(TOOL_NAMES.length);
  });

  it('refuses a session token for tools/call', async () => {
    const c = await client(bearer(acct.token));
    await expectHttpStatus(c.callTool({ name: 'whoami', arguments: {} }), 401);
  });

  it('tells which account the key belongs to', async () => {
    const c = await client(bearer(acct.apiKey));
    const me = structured(await c.callTool({ name: 'whoami', arguments: {} }));
    expect(me.account_id).to.equal(acct.userId);
    expect(me.user).to.include({ id: acct.userId, email: acct.email });
    expect(me.user.api_key.preview).to.equal(`svc_…${acct.apiKey.slice(-8)}`);
  });

  it('refuses a rotated key at once, and takes the new one', async () => {
    const old = await client(bearer(acct.apiKey));
    structured(await old.callTool({ name: 'whoami', arguments: {} }));
    const rotated = await call(api.url, 'POST', '/api/auth/api-key', { headers: bearer(acct.token) });
    expect(rotated.status).to.equal(201);
    await expectHttpStatus(old.callTool({ name: 'whoami', arguments: {} }), 401);
    const fresh = await client(bearer(rotated.body.api_key));
    expect(structured(await fresh.callTool({ name: 'whoami', arguments: {} })).account_id).to.equal(acct.userId);
  });

  it('wait_for_event returns an event ingested while it waits', async () => {
    const c = await client(bearer(acct.apiKey));
    let settled = false;
    const pending = c.callTool({ name: 'wait_for_event', arguments: { types: ['message.received'], timeout_ms: 30_000 } }).finally(() => {
      settled = true;
    });
    await waiterRegistered(acct.userId);
    await ingest(api, [{ account_id: acct.userId, type: 'call.started' }]);
    await sleep(200);
    expect(settled, 'returned before a matching event').to.equal(false);
    const [sent] = await ingest(api, [{ account_id: acct.userId, type: 'message.received', data: { from: '+15550100', text: 'hi' } }]);
    const result = structured(await pending);
    expect(result.event).to.include({ id: sent!.id, type: 'message.received', cursor: sent!.cursor });
    expect(result.event.data).to.deep.equal({ from: '+15550100', text: 'hi' });
    expect(result).to.not.have.property('timed_out');
  });

  it('wait_for_event with a short timeout returns the timed-out result', async () => {
    const c = await client(bearer(acct.apiKey));
    const result = structured(await c.callTool({ name: 'wait_for_event', arguments: { timeout_ms: 300 } }));
    expect(result).to.include({ event: null, timed_out: true });
    expect(result).to.have.property('cursor');
  });

  it('wait_for_event with since returns an event that arrived between two calls', async () => {
    const c = await client(bearer(acct.apiKey));
    const [first] = await ingest(api, [{ account_id: acct.userId, type: 'call.started' }]);
    const [between] = await ingest(api, [{ account_id: acct.userId, type: 'call.ended' }]);
    const result = structured(await c.callTool({ name: 'wait_for_event', arguments: { since: first!.cursor, timeout_ms: 20_000 } }));
    expect(result.event.id).to.equal(between!.id);
  });

  it('list_events pages through the account with the cursor', async () => {
    const c = await client(bearer(acct.apiKey));
    const types = ['call.started', 'message.sent', 'call.ended', 'message.sent', 'call.completed'];
    const sent = await ingest(api, types.map((type, n) => ({ account_id: acct.userId, type, data: { n } })));
    // Ingest acknowledges once Kafka has the events; listing reads what has been stored.
    await eventually(async () => {
      const all = structured(await c.callTool({ name: 'list_events', arguments: {} }));
      return all.events.length === sent.length ? true : undefined;
    });

    const seen: string[] = [];
    let since: string | undefined;
    const pageSizes: number[] = [];
    for (;;) {
      const page = structured(await c.callTool({ name: 'list_events', arguments: since ? { limit: 2, since } : { limit: 2 } }));
      pageSizes.push(page.events.length);
      seen.push(...page.events.map((e: { id: string }) => e.id));
      if (page.events.length === 0) {
        expect(page.cursor).to.equal(since);
        break;
      }
      expect(page.cursor).to.equal(page.events.at(-1).cursor);
      since = page.cursor;
    }
    expect(pageSizes).to.deep.equal([2, 2, 1, 0]);
    expect(seen).to.deep.equal(sent.map((e) => e.id));

    const filtered = structured(await c.callTool({ name: 'list_events', arguments: { type: 'message.sent' } }));
    expect(filtered.events.map((e: { id: string }) => e.id)).to.deep.equal([sent[1]!.id, sent[3]!.id]);
  });

  it('list_event_types answers the catalog of GET /api/v1/event-types, which the client checks against its outputSchema', async () => {
    const c = await client(bearer(acct.apiKey));
    const catalog = structured(await c.callTool({ name: 'list_event_types', arguments: {} }));
    const http = await call(api.url, 'GET', '/api/v1/event-types', { headers: bearer(acct.apiKey) });
    expect(catalog).to.deep.equal(http.body);
    expect(catalog.event_types.find((t: { type: string }) => t.type === 'message.received').data_schema.properties).to.include.keys('from', 'text');
  });

  it('reports a service refusal as an isError result the model can read (a cursor of another partition)', async () => {
    const mine = api.deps.events.producer.partitionOf(acct.userId);
    const foreign = encodeCursor({ partition: (mine + 1) % api.deps.config.kafka.eventsPartitions, offset: 0n });
    const c = await client(bearer(acct.apiKey));
    const result = await c.callTool({ name: 'list_events', arguments: { since: foreign } });
    expect(result.isError).to.equal(true);
    expect(result).to.not.have.property('structuredContent');
    expect((result.content as Array<{ text: string }>)[0]!.text).to.match(/since/).and.match(/not a cursor of this account/);
  });

  it('manages webhooks: create (secret shown once), list, ping through the log, update, rotate the secret, delete', async () => {
    const c = await client(bearer(acct.apiKey));
    // A literal public address passes the URL rules without DNS (nothing is delivered in this test).
    const created = structured(await c.callTool({ name: 'create_webhook', arguments: { url: 'https://93.184.216.34/in', events: ['message.received'], description: 'agent' } }));
    expect(created.id).to.match(/^wh_[0-9a-f]{24}$/);
    expect(created.secret).to.match(/^whsec_/);
    expect(created).to.include({ url: 'https://93.184.216.34/in', description: 'agent', last_status: null });

    const listed = structured(await c.callTool({ name: 'list_webhooks', arguments: {} }));
    expect(listed.webhooks.map((w: { id: string }) => w.id)).to.deep.equal([created.id]);
    expect(JSON.stringify(listed)).to.not.include(created.secret);
    // The HTTP API shows the same subscription.
    const http = await call(api.url, 'GET', '/api/v1/webhooks', { headers: bearer(acct.apiKey) });
    expect(http.body).to.deep.equal(listed);

    const ping = structured(await c.callTool({ name: 'ping_webhook', arguments: { id: created.id } }));
    expect(ping.event_id).to.match(/^evt_/);
    const pinged = await eventually(async () => {
      const page = structured(await c.callTool({ name: 'list_events', arguments: { type: 'webhook.ping' } }));
      return page.events.length > 0 ? page.events[0] : undefined;
    });
    expect(pinged).to.deep.include({ id: ping.event_id, type: 'webhook.ping' });
    expect(pinged.data).to.deep.equal({ subscription_id: created.id });
    // The agent can ask what happened to it: the event with its deliveries (none yet or one, to this subscription), and the stats.
    const detail = structured(await c.callTool({ name: 'get_event_deliveries', arguments: { event_id: ping.event_id } }));
    expect(detail.event).to.deep.include({ id: ping.event_id, type: 'webhook.ping' });
    expect(detail.deliveries.every((d: { webhook_id: string }) => d.webhook_id === created.id)).to.equal(true);
    expect((await call(api.url, 'GET', `/api/v1/events/${ping.event_id}/deliveries`, { headers: bearer(acct.apiKey) })).body.event).to.deep.equal(detail.event);
    const stats = structured(await c.callTool({ name: 'get_webhook_stats', arguments: { id: created.id, window: '24h' } }));
    expect(stats).to.include({ webhook_id: created.id, window: '24h' });
    expect(stats.buckets).to.have.length(24);
    for (const args of [{ event_id: 'evt_000000000000000000000000' }, { event_id: 'nope' }]) {
      const refused = await c.callTool({ name: 'get_event_deliveries', arguments: args });
      expect(refused.isError, JSON.stringify(args)).to.equal(true);
      expect((refused.content as Array<{ text: string }>)[0]!.text).to.match(/Event not found/);
    }
    expect((await c.callTool({ name: 'get_webhook_stats', arguments: { id: created.id, window: '7d' } })).isError).to.equal(true);

    // Resend, recover, replay: the same services as the HTTP routes, an idempotency key as an argument.
    const replayArgs = { id: created.id, since: pinged.cursor, idempotency_key: `mcp-${created.id}` };
    const replayed = structured(await c.callTool({ name: 'replay_events_to_webhook', arguments: replayArgs }));
    expect(replayed).to.have.all.keys('queued', 'cursor', 'truncated');
    expect(structured(await c.callTool({ name: 'replay_events_to_webhook', arguments: replayArgs }))).to.deep.equal(replayed);
    const recovered = structured(await c.callTool({ name: 'recover_webhook_deliveries', arguments: { id: created.id, since: new Date(Date.now() - 60_000).toISOString() } }));
    expect(recovered).to.deep.equal({ queued: 0, truncated: false, next_since: null, next_after_id: null });
    const unknown = await c.callTool({ name: 'resend_delivery', arguments: { id: created.id, delivery_id: `dlv_${'0'.repeat(24)}` } });
    expect(unknown.isError).to.equal(true);
    expect((unknown.content as Array<{ text: string }>)[0]!.text).to.match(/Delivery not found/);
    expect((await c.callTool({ name: 'recover_webhook_deliveries', arguments: { id: created.id, since: 'yesterday' } })).isError).to.equal(true);

    const updated = structured(await c.callTool({ name: 'update_webhook', arguments: { id: created.id, enabled: false, events: ['*'] } }));
    expect(updated).to.include({ id: created.id, enabled: false, description: 'agent' });
    expect(updated.events).to.deep.equal(['*']);
    expect(updated).to.not.have.property('secret');
    expect((await call(api.url, 'GET', `/api/v1/webhooks/${created.id}`, { headers: bearer(acct.apiKey) })).body).to.deep.equal(updated);
    for (const args of [{ id: created.id }, { id: created.id, url: 'https://10.1.2.3/in' }, { id: created.id, enabled: 'no' }]) {
      const refused = await c.callTool({ name: 'update_webhook', arguments: args });
      expect(refused.isError, JSON.stringify(args)).to.equal(true);
    }

    const rotated = structured(await c.callTool({ name: 'rotate_webhook_secret', arguments: { id: created.id, grace_period_s: 600 } }));
    expect(rotated.secret).to.match(/^whsec_/).and.not.equal(created.secret);
    expect(Date.parse(rotated.previous_secret_expires_at) - Date.now()).to.be.within(590_000, 600_000);
    expect((await call(api.url, 'POST', `/api/v1/webhooks/${created.id}/secret`, { headers: bearer(acct.apiKey) })).body).to.deep.equal({ secret: rotated.secret });
    expect(structured(await c.callTool({ name: 'rotate_webhook_secret', arguments: { id: created.id } })).previous_secret_expires_at).to.be.a('string');
    for (const args of [{ id: created.id, grace_period_s: -1 }, { id: created.id, grace_period_s: 604_801 }, { id: 'wh_000000000000000000000000' }]) {
      const refused = await c.callTool({ name: 'rotate_webhook_secret', arguments: args });
      expect(refused.isError, JSON.stringify(args)).to.equal(true);
    }

    expect(structured(await c.callTool({ name: 'delete_webhook', arguments: { id: created.id } }))).to.deep.equal({ id: created.id, deleted: true });
    const again = await c.callTool({ name: 'delete_webhook', arguments: { id: created.id } });
    expect(again.isError).to.equal(true);
    expect((again.content as Array<{ text: string }>)[0]!.text).to.match(/Webhook not found/);
    expect(structured(await c.callTool({ name: 'list_webhooks', arguments: {} })).webhooks).to.deep.equal([]);
  });

  it('create_webhook applies the HTTP API\'s URL rules: no plain HTTP, no private or loopback address', async () => {
    const c = await client(bearer(acct.apiKey));
    for (const url of ['http://93.184.216.34/in', 'https://127.0.0.1/in', 'https://10.1.2.3/in', 'https://[::ffff:127.0.0.1]/in']) {
      const result = await c.callTool({ name: 'create_webhook', arguments: { url, events: ['*'] } });
      expect(result.isError, url).to.equal(true);
      expect((result.content as Array<{ text: string }>)[0]!.text, url).to.match(/url/);
    }
    expect(structured(await c.callTool({ name: 'list_webhooks', arguments: {} })).webhooks).to.deep.equal([]);
  });

  it('reports arguments outside the inputSchema as an isError result to a 2025-11-25 client', async () => {
    const c = await client(bearer(acct.apiKey));
    const result = await c.callTool({ name: 'create_webhook', arguments: { url: 'https://93.184.216.34/in', events: ['call.exploded'], colour: 'red' } });
    expect(result.isError).to.equal(true);
    const text = (result.content as Array<{ text: string }>)[0]!.text;
    expect(text).to.match(/Invalid arguments for tool create_webhook/).and.match(/events\.0/).and.match(/colour/);
  });

  it('stops waiting when the client goes away', async () => {
    const c = await connectClient(api.url, bearer(acct.apiKey));
    const pending = c.callTool({ name: 'wait_for_event', arguments: { timeout_ms: 50_000 } }).catch((err: unknown) => err);
    await waiterRegistered(acct.userId);
    await c.close();
    await pending;
    // Freed long before the 50 s timeout.
    await eventually(async () => (api.deps.events.registry.hasAccount(acct.userId) ? undefined : true), 5000, 10);
  });
});
