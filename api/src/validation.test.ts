import { expect } from 'chai';
import { AppError } from '#shared/errors/index.js';
import { EVENT_TYPES, PRODUCER_EVENT_TYPES } from '#shared/eventlog/types.js';
import { statsQuery } from './features/activity/schemas.js';
import { parseIngestBody } from './features/ingest/schemas.js';
import { createWebhookBody } from './features/webhooks/schemas.js';
import { bodyValidator, MAX_DETAILS, nestedDeeperThan, queryValidator } from './validation.js';

function failure(fn: () => unknown): AppError {
  try {
    fn();
  } catch (err) {
    if (err instanceof AppError) return err;
    throw err;
  }
  throw new Error('expected a validation failure');
}

describe('validation', () => {
  const query = queryValidator<{ limit?: number }>({ type: 'object', additionalProperties: false, properties: { limit: { type: 'integer', minimum: 1, maximum: 500 } } });
  const body = bodyValidator<{ name: string; extra?: unknown }>({ type: 'object', additionalProperties: false, required: ['name'], properties: { name: { type: 'string' }, extra: {} } });

  it('names the allowed values where ajv says only "one of the allowed values": the event type, window and other enums', () => {
    const types = EVENT_TYPES.join(', ');
    const ingest = failure(() => parseIngestBody({ events: [{ account_id: 'usr_1', type: 'call.start', data: {} }] }, { maxBatch: 10, maxDataBytes: 1024 }));
    // Ingest names the types a producer may send (the service writes the operational ones itself).
    expect(ingest.details).to.deep.include({ path: 'events[0].type', message: `must be one of: ${PRODUCER_EVENT_TYPES.join(', ')}` });
    expect(failure(() => statsQuery({ window: '7d' })).details).to.deep.equal([{ path: 'window', message: 'must be one of: 1h, 24h' }]);
    const webhook = failure(() => createWebhookBody({ url: 'https://hooks.example.com/x', events: ['call.begun'] }));
    expect(webhook.details).to.deep.include({ path: 'events.0', message: `must be one of: *, ${types}` });
    const many = bodyValidator<{ n: number }>({ type: 'object', properties: { n: { enum: Array.from({ length: 30 }, (_, i) => i) } } });
    expect(failure(() => many({ n: 99 })).details?.[0]?.message).to.equal(`must be one of: ${Array.from({ length: 20 }, (_, i) => i).join(', ')}, … (30 in all)`);
    const exact = bodyValidator<{ v: string }>({ type: 'object', properties: { v: { const: 'one' } } });
    expect(failure(() => exact({ v: 'two' })).details?.[0]?.message).to.equal('must be one');
  });

  it('refuses query numbers that coerce to Infinity (ajv skips minimum/maximum for them)', () => {
    for (const limit of ['1e400', 'Infinity', '-1e400']) {
      const err = failure(() => query({ limit }));
      expect(err.code, limit).to.equal('validation_failed');
      expect(err.details?.[0]?.path).to.equal('limit');
    }
    expect(query({ limit: '500' })).to.deep.equal({ limit: 500 });
  });

  it('refuses non-finite numbers anywhere in a body, at any depth', () => {
    const deep = JSON.parse(`{"name":"x","extra":${'['.repeat(50_000)}1e400${']'.repeat(50_000)}}`);
    expect(failure(() => body(deep)).details?.[0]?.message).to.equal('must be a finite number');
  });

  it('refuses lone surrogates in values and keys, accepts proper pairs', () => {
    expect(failure(() => body({ name: 'a\ud800' })).details?.[0]).to.deep.equal({ path: 'name', message: 'must be well-formed Unicode (it has a lone surrogate)' });
    expect(failure(() => body({ name: 'x', extra: { ['k\udc00']: 1 } })).details?.[0]?.path).to.equal('extra.k\ufffd');
    expect(body({ name: '\ud83d\ude00' })).to.deep.equal({ name: '😀' });
  });

  it(`lists at most ${MAX_DETAILS} problems and says how many there were`, () => {
    const input: Record<string, unknown> = { name: 'x' };
    for (let i = 0; i < 500; i++) input[`k${i}`] = i;
    const err = failure(() => body(input));
    expect(err.details).to.have.length(MAX_DETAILS);
    expect(err.message).to.equal(`Request validation failed (500 problems, first ${MAX_DETAILS} shown)`);
  });

  it('measures nesting depth without recursion', () => {
    expect(nestedDeeperThan({ a: [1, { b: 2 }] }, 3)).to.equal(false);
    expect(nestedDeeperThan({ a: [1, { b: {} }] }, 3)).to.equal(true);
    expect(nestedDeeperThan('text', 0)).to.equal(false);
    expect(nestedDeeperThan(JSON.parse('['.repeat(200_000) + ']'.repeat(200_000)), 32)).to.equal(true);
  });
});
