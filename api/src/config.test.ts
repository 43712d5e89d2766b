import { expect } from 'chai';
import { loadApiConfig } from './config.js';

describe('api config', () => {
  it('requires real secrets in production', () => {
    expect(() => loadApiConfig({ NODE_ENV: 'production' })).to.throw(/JWT_SECRET is required when NODE_ENV=production/);
    expect(() => loadApiConfig({ NODE_ENV: 'production', JWT_SECRET: 'x'.repeat(40) })).to.throw(/INGEST_TOKEN is required/);
  });

  it('refuses a short secret', () => {
    expect(() => loadApiConfig({ JWT_SECRET: 'short' })).to.throw(/JWT_SECRET must be at least 32 characters/);
  });

  it('uses the docs/spec.md limits by default and takes overrides', () => {
    const c = loadApiConfig({});
    expect(c.limits).to.deep.equal({ apiKeyPerMinute: 100, sessionPerMinute: 600, signupPerHour: 10, loginPerMinute: 30 });
    expect(c.http).to.include({ trustProxy: false, proxyHops: 1 });
    expect(loadApiConfig({ SIGNUP_LIMIT_PER_HOUR: '50' }).limits.signupPerHour).to.equal(50);
    expect(() => loadApiConfig({ API_KEY_LIMIT_PER_MINUTE: '0' })).to.throw(/API_KEY_LIMIT_PER_MINUTE must be between 1/);
    expect(() => loadApiConfig({ TRUST_PROXY_HOPS: 'two' })).to.throw(/TRUST_PROXY_HOPS must be an integer/);
  });

  it('uses the event log limits of docs/spec.md section 8 by default', () => {
    const c = loadApiConfig({ EVENTS_TOPIC: 'ev' });
    expect(c.events).to.include({ ingestMaxBatch: 1000, ingestMaxDataBytes: 65536, longPollMaxMs: 55_000, longPollDefaultMs: 30_000, materializerGroupId: 'ev.materializer.event_platform', fanoutGroupPrefix: 'ev.fanout' });
    expect(c.streams).to.include({ durationMs: 50_000, heartbeatMs: 15_000, retryMs: 3000, tokenTtlSeconds: 120, maxPerAccount: 6 });
    expect(() => loadApiConfig({ LONG_POLL_MAX_MS: '60000' })).to.throw(/LONG_POLL_MAX_MS must be between 1000 and 55000/);
    expect(() => loadApiConfig({ LONG_POLL_MAX_MS: '20000' })).to.throw(/LONG_POLL_DEFAULT_MS must not exceed LONG_POLL_MAX_MS/);
    expect(loadApiConfig({ LONG_POLL_MAX_MS: '20000', LONG_POLL_DEFAULT_MS: '10000' }).events.longPollMaxMs).to.equal(20_000);
  });
});

describe('api config: MCP_ALLOWED_ORIGINS', () => {
  it('defaults to no browser origins', () => {
    expect(loadApiConfig({}).mcp.allowedOrigins).to.deep.equal([]);
  });

  it('normalises origins the way browsers send them', () => {
    const config = loadApiConfig({ MCP_ALLOWED_ORIGINS: 'https://App.Example.com, http://localhost:6274, https://x.example:443' });
    expect(config.mcp.allowedOrigins).to.deep.equal(['https://app.example.com', 'http://localhost:6274', 'https://x.example']);
  });

  it('refuses an entry with a path or another scheme', () => {
    expect(() => loadApiConfig({ MCP_ALLOWED_ORIGINS: 'https://a.example/path' })).to.throw(/MCP_ALLOWED_ORIGINS has a bad entry/);
    expect(() => loadApiConfig({ MCP_ALLOWED_ORIGINS: 'ftp://a.example' })).to.throw(/MCP_ALLOWED_ORIGINS/);
    expect(() => loadApiConfig({ MCP_ALLOWED_ORIGINS: 'not a url' })).to.throw(/MCP_ALLOWED_ORIGINS/);
  });
});
