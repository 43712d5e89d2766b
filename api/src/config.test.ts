import { expect } from 'chai';
import { loadApiConfig as load, DEV_INGEST_TOKEN } from './config.js';
import type { Env } from '#shared/config/index.js';

/** Development mode (`npm start`): the only one where missing secrets fall back to their defaults. */
const loadApiConfig = (env: Env) => load({ NODE_ENV: 'development', ...env });
const SECRETS = { JWT_SECRET: 'j'.repeat(40), INGEST_TOKEN: 'i'.repeat(30), WEBHOOK_SECRET_KEY: Buffer.alloc(32, 7).toString('base64') };

describe('api config', () => {
  it('requires every secret outside an explicit NODE_ENV=development, naming the missing one', () => {
    for (const mode of [{}, { NODE_ENV: 'production' }, { NODE_ENV: 'test' }]) {
      expect(() => load({ ...mode })).to.throw(/JWT_SECRET is required/);
      expect(() => load({ ...mode, JWT_SECRET: SECRETS.JWT_SECRET })).to.throw(/INGEST_TOKEN is required/);
      expect(() => load({ ...mode, JWT_SECRET: SECRETS.JWT_SECRET, INGEST_TOKEN: SECRETS.INGEST_TOKEN })).to.throw(/WEBHOOK_SECRET_KEY is required/);
      expect(load({ ...mode, ...SECRETS }).auth.jwtSecret).to.equal(SECRETS.JWT_SECRET);
    }
    // An unset NODE_ENV is production, not development.
    expect(load(SECRETS).production).to.equal(true);
  });

  it('uses the development defaults only in development mode on a loopback HOST', () => {
    expect(loadApiConfig({}).ingestToken).to.equal(DEV_INGEST_TOKEN);
    expect(loadApiConfig({ HOST: '::1' }).ingestToken).to.equal(DEV_INGEST_TOKEN);
    expect(() => loadApiConfig({ HOST: '0.0.0.0' })).to.throw(/JWT_SECRET is the public development default and is refused with HOST=0.0.0.0/);
    expect(() => loadApiConfig({ HOST: '0.0.0.0', JWT_SECRET: SECRETS.JWT_SECRET })).to.throw(/INGEST_TOKEN is the public development default/);
    expect(() => loadApiConfig({ HOST: '192.168.1.5', JWT_SECRET: SECRETS.JWT_SECRET, INGEST_TOKEN: SECRETS.INGEST_TOKEN })).to.throw(/WEBHOOK_SECRET_KEY is the public development default/);
    expect(loadApiConfig({ HOST: '0.0.0.0', ...SECRETS }).http.host).to.equal('0.0.0.0');
    // Set explicitly to a known default: refused off loopback, and in production anywhere.
    expect(() => load({ NODE_ENV: 'test', ...SECRETS, HOST: '0.0.0.0', INGEST_TOKEN: DEV_INGEST_TOKEN })).to.throw(/INGEST_TOKEN is the public development default/);
    expect(() => load({ NODE_ENV: 'production', ...SECRETS, INGEST_TOKEN: DEV_INGEST_TOKEN })).to.throw(/INGEST_TOKEN is the public development default and is refused when NODE_ENV=production/);
  });

  it('refuses a short secret', () => {
    expect(() => loadApiConfig({ JWT_SECRET: 'short' })).to.throw(/JWT_SECRET must be at least 32 characters/);
  });

  it('uses the docs/spec.md limits by default and takes overrides', () => {
    const c = loadApiConfig({});
    expect(c.limits).to.deep.equal({ apiKeyPerMinute: 100, sessionPerMinute: 600, signupPerHour: 10, loginPerMinute: 30, loginFailuresPerAccount: 10, loginAccountWindowSeconds: 900, flushMs: 1000 });
    expect(c.http).to.include({ trustProxy: false, proxyHops: 1 });
    expect(loadApiConfig({ SIGNUP_LIMIT_PER_HOUR: '50' }).limits.signupPerHour).to.equal(50);
    expect(() => loadApiConfig({ API_KEY_LIMIT_PER_MINUTE: '0' })).to.throw(/API_KEY_LIMIT_PER_MINUTE must be between 1/);
    expect(() => loadApiConfig({ TRUST_PROXY_HOPS: 'two' })).to.throw(/TRUST_PROXY_HOPS must be an integer/);
  });

  it('uses the event log limits of docs/spec.md section 8 by default', () => {
    const c = loadApiConfig({ EVENTS_TOPIC: 'ev' });
    expect(c.events).to.include({ ingestMaxBatch: 1000, ingestMaxDataBytes: 65536, longPollMaxMs: 55_000, longPollDefaultMs: 30_000, materializerGroupId: 'ev.materializer.event_platform', fanoutGroupPrefix: 'ev.fanout' });
    expect(c.events.producerLingerMs, 'an event is produced at once when no send is in flight').to.equal(0);
    expect(loadApiConfig({ PRODUCER_LINGER_MS: '2' }).events.producerLingerMs).to.equal(2);
    expect(c.events.materializerChunkEvents, 'events the materializer writes as one chunk').to.equal(500);
    expect(loadApiConfig({ MATERIALIZER_CHUNK_EVENTS: '2000' }).events.materializerChunkEvents).to.equal(2000);
    expect(() => loadApiConfig({ MATERIALIZER_CHUNK_EVENTS: '0' })).to.throw(/MATERIALIZER_CHUNK_EVENTS must be between 1 and 100000/);
    expect(c.events.materializerFetchWaitMs, 'how long a materializer fetch may wait to fill').to.equal(250);
    expect(loadApiConfig({ MATERIALIZER_FETCH_WAIT_MS: '0' }).events.materializerFetchWaitMs).to.equal(0);
    expect(() => loadApiConfig({ MATERIALIZER_FETCH_WAIT_MS: '6000' })).to.throw(/MATERIALIZER_FETCH_WAIT_MS must be between 0 and 5000/);
    expect(c.streams).to.include({ durationMs: 50_000, heartbeatMs: 15_000, retryMs: 3000, tokenTtlSeconds: 120, maxPerAccount: 6 });
    expect(() => loadApiConfig({ LONG_POLL_MAX_MS: '60000' })).to.throw(/LONG_POLL_MAX_MS must be between 1000 and 55000/);
    expect(() => loadApiConfig({ LONG_POLL_MAX_MS: '20000' })).to.throw(/LONG_POLL_DEFAULT_MS must not exceed LONG_POLL_MAX_MS/);
    expect(loadApiConfig({ LONG_POLL_MAX_MS: '20000', LONG_POLL_DEFAULT_MS: '10000' }).events.longPollMaxMs).to.equal(20_000);
  });
});

describe('api config: password hashing', () => {
  it('defaults to the OWASP scrypt floor, N=2^17, and refuses less in production', () => {
    expect(loadApiConfig({}).auth).to.include({ scryptN: 131072, hashConcurrency: 2, hashQueue: 32 });
    expect(loadApiConfig({ PASSWORD_SCRYPT_N: '16384' }).auth.scryptN).to.equal(16384);
    expect(() => loadApiConfig({ PASSWORD_SCRYPT_N: '100000' })).to.throw(/PASSWORD_SCRYPT_N must be a power of two/);
    expect(() => load({ NODE_ENV: 'production', ...SECRETS, PASSWORD_SCRYPT_N: '16384' })).to.throw(/PASSWORD_SCRYPT_N must be at least 131072/);
    expect(load({ NODE_ENV: 'production', ...SECRETS, PASSWORD_SCRYPT_N: '262144' }).auth.scryptN).to.equal(262144);
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
