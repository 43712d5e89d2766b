/**
 * Property-based fuzzing of every endpoint in the table: bodies (valid,
 * mutated, junk text, wrong content types), query strings and headers. Every
 * answer must be safe (no 5xx, no leaked internals, 4xx in the house error
 * shape with the request id) and a tampered credential never succeeds.
 */
import type { RunningApi } from '../../src/server.js';
import { sharedApis } from '../support/api.js';
import { ENDPOINTS, endpointName } from './support/endpoints.js';
import { fuzzEndpoint } from './support/fuzz.js';
import { richFixture } from './support/fixtures.js';
import { total } from './support/tally.js';

describe('hostile: fuzzing every endpoint', function () {
  this.timeout(180_000);
  let apis: [RunningApi, RunningApi];

  before(async () => {
    apis = await sharedApis();
  });

  after(() => {
    console.log(`        fuzz total so far: ${total('fuzz')} cases`);
  });

  for (const ep of ENDPOINTS) {
    it(`answers ${endpointName(ep)} safely, whatever the body, query and headers`, async () => {
      await fuzzEndpoint(() => apis, ep, () => richFixture(apis[0]), apis[0].deps.config.ingestToken)();
    });
  }
});
