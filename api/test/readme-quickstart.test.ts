/**
 * The README's "Try it in five commands", run as a newcomer pastes it: the block is taken
 * from README.md by its marker and run with bash, curl and jq against an API process in
 * development mode with the development secrets, as `npm start` runs it. Only the address
 * changes (the test's API listens on a free port); `npm run emit` reads it from API_URL.
 */
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import type { RunningApi } from '../src/server.js';
import { startDevApi } from './support/api.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const MARKER = '<!-- quickstart:';
const ADDRESS_LINE = 'B=http://127.0.0.1:3000';

/** The shell block after the README's marker. */
function quickstartBlock(readme: string): string {
  const at = readme.indexOf(MARKER);
  if (at < 0) throw new Error(`README.md has no ${MARKER} marker`);
  const block = /```sh\n([\s\S]*?)```/.exec(readme.slice(at));
  if (!block) throw new Error('no ```sh block after the quickstart marker');
  return block[1]!;
}

/** A directory holding `bin` on PATH, else where the test setup (scripts/infra/test-tools.mjs) put it. */
function toolDir(bin: string, envVar: string): string {
  const given = process.env[envVar];
  if (given) return dirname(given);
  const found = (process.env.PATH ?? '').split(':').find((d) => d && existsSync(join(d, bin)));
  if (!found) throw new Error(`${bin} is not installed: run the test with npm test, which installs it`);
  return found;
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs the block with bash in its own process group and waits for bash to exit; the
 * stream's curl runs on in the background (as in a user's shell) until `streamed` matches
 * what it printed or `streamMs` passes, then the group is stopped.
 */
function runBlock(script: string, apiUrl: string, streamed: RegExp, streamMs: number): Promise<Run> {
  const env: NodeJS.ProcessEnv = { ...process.env, API_URL: apiUrl, PATH: [toolDir('jq', 'JQ_BIN'), toolDir('curl', 'CURL_BIN'), process.env.PATH].join(':') };
  delete env.INGEST_TOKEN; // emit falls back to the development token, as on a developer's machine
  const child = spawn('bash', ['-c', script], { cwd: root, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => {
    child.on('exit', (code) => {
      const started = Date.now();
      const check = setInterval(() => {
        if (!streamed.test(stdout) && Date.now() - started < streamMs) return;
        clearInterval(check);
        try {
          process.kill(-child.pid!, 'SIGTERM');
        } catch {
          // the group has already ended
        }
        resolve({ code, stdout, stderr });
      }, 50);
    });
  });
}

describe("README's Try it in five commands", function () {
  this.timeout(120_000);
  let api: RunningApi;
  let script: string;
  const EVENT = /^data: .*"type":"message\.received"/m;

  before(async () => {
    api = await startDevApi();
    const block = quickstartBlock(readFileSync(join(root, 'README.md'), 'utf8'));
    expect(block.split('\n')[0], 'the block starts by naming the address').to.equal(ADDRESS_LINE);
    script = block.replace(ADDRESS_LINE, `B=${api.url}`);
  });

  for (const run of ['first', 'second']) {
    it(`works when pasted a ${run} time: the stream prints the emitted events`, async () => {
      const r = await runBlock(script, api.url, EVENT, 20_000);
      expect(r.code, r.stderr).to.equal(0);
      expect(r.stdout, `nothing streamed; stderr: ${r.stderr}`).to.match(EVENT);
      expect(r.stderr).not.to.match(/jq: error|curl: \(/);
    });
  }

  it('fails loudly when a step fails: an API that is not there', async () => {
    const dead = 'http://127.0.0.1:9'; // discard port: nothing listens
    const r = await runBlock(script.replaceAll(api.url, dead), dead, /$^/, 0);
    expect(r.code).not.to.equal(0);
    expect(r.stderr).to.match(/curl: \(7\)/);
  });
});

