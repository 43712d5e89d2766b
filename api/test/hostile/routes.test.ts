/**
 * The hostile suite is only as complete as its endpoint table: this fails when
 * the app serves a route the table does not list (or the table lists one the
 * app no longer serves), so every new endpoint gets fuzzed and put through the
 * credential and cross-account matrices.
 */
import { expect } from 'chai';
import type Router from '@koa/router';
import { createApp } from '../../src/app.js';
import { sharedApis } from '../support/api.js';
import { ENDPOINTS, endpointName } from './support/endpoints.js';

interface RouterLayer {
  methods: string[];
  path: string | RegExp;
}

/** Every (method, path) the app's routers declare, HEAD folded into GET. */
function servedRoutes(middleware: unknown[]): string[] {
  const routes = new Set<string>();
  for (const fn of middleware) {
    const router = (fn as { router?: Router }).router;
    if (!router) continue;
    for (const layer of router.stack as unknown as RouterLayer[]) {
      // router.all() registers every method Node knows: one row, ALL, in the table.
      if (layer.methods.length > 10) {
        routes.add(`ALL ${String(layer.path)}`);
        continue;
      }
      for (const method of layer.methods) {
        if (method !== 'HEAD') routes.add(`${method} ${String(layer.path)}`);
      }
    }
  }
  return [...routes].sort();
}

describe('hostile: the endpoint table', () => {
  it('lists exactly the routes the app serves', async () => {
    const [api] = await sharedApis();
    const app = createApp(api.deps);
    const served = servedRoutes(app.middleware);
    expect(served.length, 'routes found in the app').to.be.greaterThan(5);
    expect(ENDPOINTS.map(endpointName).sort()).to.deep.equal(served);
  });
});
