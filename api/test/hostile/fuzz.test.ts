/**
 * Property-based fuzzing of every endpoint in the table: bodies (valid,
 * mutated, junk text, wrong content types), query strings and headers. Every
 * answer must be safe (no 5xx, no leaked internals, 4xx in the house error
 * shape with the request id) and a tampered credential never succeeds.
 */
import type { RunningApi } from '../../src/server.js';
import { sharedApis } from '../support/api.js';
import { ENDPOINTS, endpointName, type Endpoint, type Fixture } from './support/endpoints.js';
import { fuzzEndpoint } from './support/fuzz.js';
import { richFixture } from './support/fixtures.js';
import { total } from './support/tally.js';
import { dropHostileWebhooks } from './support/webhook-cleanup.js';

describe('hostile: fuzzing every endpoint', function () {
  this.timeout(180_000);
  let apis: [RunningApi, RunningApi];
  let shared: Promise<Fixture> | null = null;

  before(async () => {
    apis = await sharedApis();
  });

  /** Endpoints that change or delete what they are given get an account of their own; the rest share one. */
  const fixtureOf = (ep: Endpoint): Promise<Fixture> => (ep.changesCredential || ep.method === 'DELETE' || ep.method === 'PATCH' ? richFixture(apis[0]) : (shared ??= richFixture(apis[0])));

  after(async () => {
    console.log(`        fuzz total so far: ${total('fuzz')} cases`);
    await dropHostileWebhooks(apis[0]);
  });

  for (const ep of ENDPOINTS) {
    it(`answers ${endpointName(ep)} safely, whatever the body, query and headers`, async () => {
      await fuzzEndpoint(() => apis, ep, () => fixtureOf(ep), apis[0].deps.config.ingestToken)();
    });
  }
});
