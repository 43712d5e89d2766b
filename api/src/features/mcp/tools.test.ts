import { expect } from 'chai';
import { loadApiConfig } from '../../config.js';
import { described, Type } from '../../shapes.js';
import { createTools } from './tools.js';

describe('mcp tools', () => {
  const tools = createTools(loadApiConfig({ NODE_ENV: 'development', LONG_POLL_MAX_MS: '20000', LONG_POLL_DEFAULT_MS: '15000' }));

  it('has the fifteen tools, each with MCP-safe names, closed object inputs and an object output', () => {
    expect([...tools.keys()]).to.deep.equal(['wait_for_event', 'list_events', 'list_event_types', 'list_webhooks', 'create_webhook', 'update_webhook', 'rotate_webhook_secret', 'delete_webhook', 'ping_webhook', 'resend_delivery', 'recover_webhook_deliveries', 'replay_events_to_webhook', 'get_webhook_stats', 'get_event_deliveries', 'search_deliveries', 'whoami']);
    for (const t of tools.values()) {
      expect(t.name).to.match(/^[A-Za-z0-9_.-]{1,128}$/);
      expect(t.inputSchema).to.include({ type: 'object', additionalProperties: false });
      expect(t.outputSchema).to.include({ type: 'object' });
      expect(t.description.length, t.name).to.be.above(40);
      for (const [field, schema] of Object.entries(t.inputSchema.properties as Record<string, { description?: string }>)) {
        expect(schema.description, `${t.name}.${field}`).to.be.a('string');
      }
    }
  });

  it('states the configured long-poll limits to the model', () => {
    const wait = tools.get('wait_for_event')!;
    expect(wait.description).to.include('20000 ms');
    expect((wait.inputSchema.properties as Record<string, { description: string }>).timeout_ms!.description).to.include('at most 20000, default 15000');
  });

  it('validates arguments against the inputSchema, listing every bad field', () => {
    expect(() => tools.get('create_webhook')!.validate({ url: 5, events: [], extra: 1 })).to.throw().with.property('details').that.deep.includes.members([
      { path: 'url', message: 'must be string' },
      { path: 'extra', message: 'is not an allowed field' },
    ]);
    expect(tools.get('delete_webhook')!.validate({ id: 'wh_1' })).to.deep.equal({ id: 'wh_1' });
  });

  it('refuses to describe a field the feature schema does not have', () => {
    expect(() => described(Type.Object({ a: Type.String() }), { b: 'nope' })).to.throw(/no property "b"/);
  });
});
