/**
 * The official MCP conformance tool against our /api/mcp: the server
 * scenarios for the lifecycle, ping, tools/list and DNS-rebinding protection
 * (with the test server's own origin on MCP_ALLOWED_ORIGINS, as a deployment
 * serving a browser client from the same origin would set it).
 */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { sharedApis } from './support/api.js';
import { MCP, serveWith } from './support/mcp.js';
import { type ConformanceTool, conformanceTool, runServerScenario } from './support/mcp-conformance.js';

const ARTIFACTS = join(fileURLToPath(new URL('../..', import.meta.url)), 'test-artifacts', 'mcp-conformance');

describe('MCP conformance (official @modelcontextprotocol/conformance)', function () {
  // The first run installs the tool and a Node 24 binary from the npm registry into the cache.
  this.timeout(360_000);
  let tool: ConformanceTool;
  let url: string;

  before(async () => {
    const [api] = await sharedApis();
    // The allowed origin is the server's own, port included.
    const origin = await serveWith(api, (deps, own) => ({ ...deps, config: { ...deps.config, mcp: { ...deps.config.mcp, allowedOrigins: [own] } } }));
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
