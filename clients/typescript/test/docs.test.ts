/**
 * docs/client.md's two examples, copied out of the page and run as written
 * (the package name pointed at the built package): the listen loop, and the
 * webhook receiver fed by `event-platform listen`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { expect } from 'chai';
import { createAccount } from '../../../api/test/support/accounts.js';
import { ingest } from '../../../api/test/support/events.js';
import { atFileEnd } from '../../../shared/test/support/cleanup.js';
import { eventually, freePort, sleep } from '../../../shared/test/support/wait.js';
import { buildClient, CLI_NODE, clientStack, type RestartableApi } from './support.js';

const PAGE = fileURLToPath(new URL('../../../docs/client.md', import.meta.url));

/** The ```js blocks of the page, in order. */
function jsBlocks(): string[] {
  return [...readFileSync(PAGE, 'utf8').matchAll(/^```js\n([\s\S]*?)^```$/gm)].map((m) => m[1]!);
}

function runExample(code: string, dist: string, env: Record<string, string>): { out: string[]; child: ChildProcess } {
  const dir = mkdtempSync(join(tmpdir(), 'client-doc-'));
  const file = join(dir, 'example.mjs');
  writeFileSync(file, code.replaceAll(`'@event-platform/client'`, `'${pathToFileURL(join(dist, 'index.js')).href}'`));
  const child = spawn(CLI_NODE, [file], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const out: string[] = [];
  let partial = '';
  const onData = (chunk: Buffer): void => {
    const parts = (partial + chunk.toString('utf8')).split('\n');
    partial = parts.pop() ?? '';
    out.push(...parts);
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  atFileEnd(() => {
    child.kill('SIGKILL');
  });
  return { out, child };
}

describe('docs/client.md: the copy-paste examples run', function () {
  this.timeout(120_000);
  let dist: string;
  let api: RestartableApi;

  before(async () => {
    [dist, { api }] = await Promise.all([buildClient(), clientStack()]);
  });

  it('has the two examples', () => {
    expect(jsBlocks()).to.have.length(2);
  });

  it('the listen example prints the events of the types it asked for, as they come', async () => {
    const account = await createAccount(api.url);
    const [code] = jsBlocks();
    const { out, child } = runExample(code!, dist, { EVENT_PLATFORM_API_KEY: account.apiKey, EVENT_PLATFORM_API_URL: api.url });
    try {
      await eventually(async () => (out.includes(`listening for ${account.userId}`) ? true : undefined), 30_000);
      // Without `since` the example starts at the live end: emit until the loop shows one, then the real set.
      const probe = await eventually(async () => {
        const [e] = await ingest(api.url, [{ account_id: account.userId, type: 'message.received', data: { probe: true } }]);
        await sleep(500);
        return out.some((l) => l.includes(e!.id)) ? e : undefined;
      }, 30_000);
      const sent = await ingest(api.url, [
        { account_id: account.userId, type: 'call.started', data: { n: 1 } },
        { account_id: account.userId, type: 'call.completed', data: { n: 2 } },
        { account_id: account.userId, type: 'message.received', data: { n: 3 } },
      ]);
      await eventually(async () => (out.some((l) => l.includes(sent[2]!.id)) ? true : undefined), 30_000);
      const after = out.slice(out.findIndex((l) => l.includes(probe.id)) + 1).filter((l) => l.startsWith('message.') || l.startsWith('call.'));
      expect(after).to.deep.equal([`call.completed ${sent[1]!.id} {"n":2}`, `message.received ${sent[2]!.id} {"n":3}`]);
    } finally {
      child.kill('SIGINT');
    }
  });

  it('the receiver example verifies what `event-platform listen` forwards, and refuses an unsigned request', async () => {
    const account = await createAccount(api.url);
    const [, code] = jsBlocks();
    const port = await freePort();
    const secret = 'whsec_' + Buffer.alloc(32, 9).toString('base64');
    const receiver = runExample(code!, dist, { WEBHOOK_SECRET: secret, PORT: String(port) });
    const cli = spawn(CLI_NODE, [join(dist, 'cli.js'), 'listen', '--forward-to', `http://127.0.0.1:${port}/hook`, '--secret', secret], {
      env: { PATH: process.env.PATH ?? '', EVENT_PLATFORM_API_KEY: account.apiKey, EVENT_PLATFORM_API_URL: api.url },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let cliOut = '';
    cli.stdout!.on('data', (c: Buffer) => (cliOut += c.toString('utf8')));
    atFileEnd(() => {
      cli.kill('SIGKILL');
    });
    try {
      await eventually(async () => (cliOut.includes('Ready!') ? true : undefined), 30_000);
      const unsigned = await eventually(async () => fetch(`http://127.0.0.1:${port}/hook`, { method: 'POST', body: '{}' }).catch(() => undefined), 10_000);
      expect(unsigned.status).to.equal(401);
      const sent = await ingest(api.url, [{ account_id: account.userId, type: 'call.ended', data: {} }]);
      await eventually(async () => (receiver.out.some((l) => l.includes(sent[0]!.id)) ? true : undefined), 30_000);
      expect(receiver.out.filter(Boolean)).to.deep.equal(['refused missing_signature', `verified call.ended ${sent[0]!.id}`]);
      // The CLI prints its line once the receiver's answer is back, a moment after the receiver printed its own.
      const forwarded = new RegExp(`call\\.ended\\s+${sent[0]!.id}\\s+--> 204`);
      await eventually(async () => (forwarded.test(cliOut) ? true : undefined), 10_000).catch(() => undefined);
      expect(cliOut).to.match(forwarded);
    } finally {
      cli.kill('SIGINT');
      receiver.child.kill('SIGINT');
    }
  });
});
