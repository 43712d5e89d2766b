/**
 * docs/api.md's examples agree with the server and the README: the SSE response headers it
 * shows are the ones the server sends, its Node EventSource example runs as written, and its
 * login example logs in the account the README's five commands sign up.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { atFileEnd } from '#test-support/cleanup.js';
import type { RunningApi } from '../src/server.js';
import { createAccount } from './support/accounts.js';
import { call, sharedApis } from './support/api.js';
import { eventually, ingest } from './support/events.js';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const apiMd = readFileSync(join(root, 'docs', 'api.md'), 'utf8');

/** The first fenced block of `lang` after `marker` in `text`. */
function blockAfter(text: string, marker: string, lang: string): string {
  const at = text.indexOf(marker);
  if (at < 0) throw new Error(`no "${marker}" in the page`);
  const m = new RegExp('```' + lang + '\\n([\\s\\S]*?)```').exec(text.slice(at));
  if (!m) throw new Error(`no \`\`\`${lang} block after "${marker}"`);
  return m[1]!;
}

describe('docs/api.md examples', function () {
  this.timeout(60_000);
  let api: RunningApi;

  before(async () => {
    [api] = await sharedApis();
  });

  it('shows the SSE response headers the server sends', async () => {
    const shown = blockAfter(apiMd, '### Server-sent events', 'http');
    const headers = Object.fromEntries(
      shown
        .split('\n\n')[0]!
        .split('\n')
        .slice(1)
        .filter((l) => /^[A-Za-z-]+: /.test(l))
        .map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 2)]),
    );
    expect(Object.keys(headers)).to.include.members(['content-type', 'cache-control', 'x-accel-buffering']);
    const who = await createAccount(api.url);
    const token = await call(api.url, 'POST', '/api/v1/events/stream-token', { headers: { 'x-api-key': who.apiKey } });
    const abort = new AbortController();
    const res = await fetch(new URL(token.body.stream_url, api.url), { signal: abort.signal });
    abort.abort();
    expect(res.status).to.equal(200);
    for (const [name, value] of Object.entries(headers)) expect(res.headers.get(name), name).to.equal(value);
  });

  it('the Node EventSource example runs as written and prints the events', async () => {
    const code = blockAfter(apiMd, '<!-- node-eventsource:', 'js');
    expect(code).to.include("from 'eventsource'");
    const who = await createAccount(api.url);
    // Under the repository, so `eventsource` resolves from its node_modules, as from a user's project.
    mkdirSync(join(root, 'test-artifacts'), { recursive: true });
    const file = join(mkdtempSync(join(root, 'test-artifacts', 'api-doc-')), 'stream.mjs');
    writeFileSync(file, code);
    const child = spawn(process.execPath, [file], { env: { PATH: process.env.PATH ?? '', KEY: who.apiKey, API_URL: api.url }, stdio: ['ignore', 'pipe', 'pipe'] });
    atFileEnd(() => void child.kill('SIGKILL'));
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    try {
      // Without `since` the stream starts at the live end: emit until one shows.
      await eventually(
        async () => {
          const [e] = await ingest(api.url, [{ account_id: who.userId, type: 'message.received', data: { text: 'hi' } }]);
          await new Promise((r) => setTimeout(r, 300));
          return out.includes(e!.cursor) && out.includes("text: 'hi'") ? true : undefined;
        },
        30_000,
      );
    } finally {
      child.kill('SIGTERM');
    }
    expect(out).not.to.match(/stream error/);
  });

  it("logs in with the README's account: the login example's email and password are the five commands'", () => {
    const readme = readFileSync(join(root, 'README.md'), 'utf8');
    const signup = /auth\/signup .*?-d '(\{[^']*\})'/.exec(readme);
    expect(signup, "the README's signup body").to.not.equal(null);
    const ada = JSON.parse(signup![1]!) as { email: string; password: string };
    const login = JSON.parse(blockAfter(apiMd, '### `POST /api/auth/login`', 'http').split('\n\n')[1]!) as { email: string; password: string };
    expect(login).to.deep.equal({ email: ada.email, password: ada.password });
  });
});
