import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { expect } from 'chai';
import { sharedApis } from './support/api.js';

/** An MCP client as an agent would run it: the official SDK over Streamable HTTP. */
async function connect(base: string, headers: Record<string, string> = {}): Promise<Client> {
  const client = new Client({ name: 'event-platform-tests', version: '1.0.0' });
  const transport = new StreamableHTTPClientTransport(new URL('/api/mcp', base), { requestInit: { headers } });
  await client.connect(transport);
  return client;
}

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

describe('MCP with the official SDK client', () => {
  let base: string;
  const clients: Client[] = [];

  before(async () => {
    const [a] = await sharedApis();
    base = a.url;
  });

  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.close()));
  });

  async function client(headers: Record<string, string> = {}): Promise<Client> {
    const c = await connect(base, headers);
    clients.push(c);
    return c;
  }

  it('connects without credentials and can ping and list tools', async () => {
    const c = await client();
    expect(c.getServerVersion()).to.include({ name: 'event-platform' });
    expect(c.getServerCapabilities()).to.deep.equal({ tools: { listChanged: false } });
    expect(c.getInstructions()).to.match(/wait_for_event/);
    expect(await c.ping()).to.deep.equal({});
    const { tools } = await c.listTools();
    expect(tools.map((t) => t.name)).to.include('whoami');
  });

  it('refuses tools/call without a key with HTTP 401', async () => {
    const c = await client();
    await expectHttpStatus(c.callTool({ name: 'whoami', arguments: {} }), 401);
  });
});
