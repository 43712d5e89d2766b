/**
 * The official MCP conformance tool against our /api/mcp: the server
 * scenarios for the lifecycle, ping, tools/list and DNS-rebinding protection
 * (with the test server's own origin on MCP_ALLOWED_ORIGINS, as a deployment
 * serving a browser client from the same origin would set it).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { atRunEnd } from '../../shared/test/support/cleanup.js';
import { createApp } from '../src/app.js';
import { sharedApis } from './support/api.js';
import { MCP } from './support/mcp.js';
import { type ConformanceTool, conformanceTool, runServerScenario } from './support/mcp-conformance.js';

const ARTIFACTS = join(fileURLToPath(new URL('../..', import.meta.url)), 'test-artifacts', 'mcp-conformance');

describe('MCP conformance (official @modelcontextprotocol/conformance)', function () {
  // The first run installs the tool and a Node 24 binary from the npm registry into the cache.
  this.timeout(360_000);
  let tool: ConformanceTool;
  let url: string;

  before(async () => {
    const [api] = await sharedApis();
    // Listen first: the allowed origin is the server's own, port included.
    const server = http.createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    atRunEnd(
      () =>
        new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        }),
    );
    const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const app = createApp({ ...api.deps, config: { ...api.deps.config, mcp: { ...api.deps.config.mcp, allowedOrigins: [origin] } } });
    server.on('request', app.callback());
    url = origin + MCP;
    tool = await conformanceTool();
  });

  for (const scenario of ['server-initialize', 'ping', 'tools-list', 'dns-rebinding-protection']) {
    it(`passes ${scenario}`, async () => {
      const run = await runServerScenario(tool, url, scenario, join(ARTIFACTS, scenario));
      expect(run.code, run.output).to.equal(0);
      expect(run.output, run.output).to.match(/Passed:\s*[1-9]\d*\/\d+, 0 failed/);
    });
  }
});
