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
});
