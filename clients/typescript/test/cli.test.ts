import { execFile, execFileSync, spawn, type ChildProcess } from 'node:child_process';
import http, { type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync } from 'node:fs';
import { networkInterfaces, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import { createAccount, type TestAccount } from '../../../api/test/support/accounts.js';
import { ingest } from '../../../api/test/support/events.js';
import { verifyServiceSignature } from '../../../shared/src/signing.js';
import { atFileEnd } from '../../../shared/test/support/cleanup.js';
import type { Receiver } from '../../../shared/test/support/receiver.js';
import { eventually, freePort } from '../../../shared/test/support/wait.js';
import { EVENT_TYPES, EventPlatform, verifyWebhook } from '../src/index.js';
import { buildClient, CLI_NODE, clientStack, type RestartableApi } from './support.js';

/** The CLI as a child process (node dist/cli.js), its output collected line by line. */
class Cli {
  readonly stdout: string[] = [];
  readonly stderr: string[] = [];
  private readonly child: ChildProcess;
  readonly exited: Promise<number | null>;

  constructor(cliPath: string, args: string[], env: Record<string, string>) {
    this.child = spawn(CLI_NODE, [cliPath, ...args], { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    const lines = (into: string[]) => {
      let partial = '';
      return (chunk: Buffer) => {
        const parts = (partial + chunk.toString('utf8')).split('\n');
        partial = parts.pop() ?? '';
        into.push(...parts);
      };
    };
    this.child.stdout!.on('data', lines(this.stdout));
    this.child.stderr!.on('data', lines(this.stderr));
    this.exited = new Promise((resolve) => this.child.once('exit', (code) => resolve(code)));
    atFileEnd(async () => {
      await this.kill();
    });
  }

  async line(pattern: RegExp, stream: 'stdout' | 'stderr' = 'stdout', timeoutMs = 30_000): Promise<string> {
    return eventually(async () => this[stream].find((l) => pattern.test(l)), timeoutMs).catch(() => {
      throw new Error(`no line matching ${pattern} on ${stream}; stdout: ${JSON.stringify(this.stdout)} stderr: ${JSON.stringify(this.stderr)}`);
    });
  }

  async kill(): Promise<number | null> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGINT');
    return this.exited;
  }
}

/** A plain-HTTP local endpoint, as a developer's app would be: records each request, answers 500 when the event's data says so. */
async function localApp(): Promise<{ url: string; requests: { headers: IncomingHttpHeaders; raw: Buffer }[]; close: () => Promise<void> }> {
  const requests: { headers: IncomingHttpHeaders; raw: Buffer }[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      requests.push({ headers: req.headers, raw });
      const fail = JSON.parse(raw.toString('utf8')).data?.fail === true;
      res.writeHead(fail ? 500 : 204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, requests, close: () => new Promise((r) => server.close(() => r())) };
}

describe(`CLI (a spawned process on Node ${execFileSync(CLI_NODE, ['-p', 'process.version']).toString().trim()}, against the real services)`, function () {
  this.timeout(120_000);
  let cli: string;
  let api: RestartableApi;
  let receiver: Receiver;
  let account: TestAccount;
  const run = (args: string[], env: Record<string, string> = {}) => new Cli(cli, args, { EVENT_PLATFORM_API_URL: api.url, EVENT_PLATFORM_API_KEY: account.apiKey, ...env });

  before(async () => {
    const [dist, stack] = await Promise.all([buildClient(), clientStack()]);
    cli = join(dist, 'cli.js');
    ({ api, receiver } = stack);
  });
  beforeEach(async () => {
    account = await createAccount(api.url);
  });

  it('listen --forward-to: prints the session secret, forwards each event signed as a real delivery, one line per event with the local status', async () => {
    const app = await localApp();
    const proc = run(['listen', '--forward-to', app.url]);
    try {
      await proc.line(/^Ready! Forwarding events of usr_\w+ to http:\/\/127\.0\.0\.1:\d+\/hook over sse$/);
      const secret = /(whsec_[A-Za-z0-9+/=]+)/.exec(await proc.line(/signing secret/))![1]!;
      const sent = await ingest(api.url, [
        { account_id: account.userId, type: 'call.started', data: { n: 1 } },
        { account_id: account.userId, type: 'message.received', data: { n: 2, fail: true } },
        { account_id: account.userId, type: 'call.ended', data: { n: 3 } },
      ]);
      await eventually(async () => (proc.stdout.filter((l) => l.includes('-->')).length >= 3 ? true : undefined), 30_000);
      const lines = proc.stdout.filter((l) => l.includes('-->'));
      expect(lines.map((l) => /(evt_\w+)\s+--> (\d+)/.exec(l)!.slice(1))).to.deep.equal([
        [sent[0]!.id, '204'],
        [sent[1]!.id, '500'],
        [sent[2]!.id, '204'],
      ]);
      expect(lines[1]).to.match(/message\.received/);
      // Each request passes both checks a receiver makes of a real delivery, with the printed secret.
      expect(app.requests).to.have.length(3);
      for (const [i, req] of app.requests.entries()) {
        expect(verifyWebhook(req.raw, req.headers, secret).id).to.equal(sent[i]!.id);
        expect(verifyServiceSignature(secret, req.raw, req.headers['x-service-signature'] as string)).to.equal(true);
        expect(req.headers['x-service-delivery']).to.match(/^dlv_[0-9a-f]{24}$/).and.equal(req.headers['webhook-id']);
        expect(req.headers['content-type']).to.equal('application/json');
      }
      // The same headers as a delivery from the delivery process (its ping is forwarded too: listen is still running).
      const client = new EventPlatform({ baseUrl: api.url, apiKey: account.apiKey });
      const hook = await client.webhooks.create({ url: receiver.url('/cli-compare'), events: ['*'] });
      await client.webhooks.ping(hook.id);
      const [real] = await receiver.waitFor('/cli-compare', 1);
      const names = (h: IncomingHttpHeaders) => Object.keys(h).filter((k) => k.startsWith('x-service-') || k.startsWith('webhook-') || k === 'content-type').sort();
      expect(names(app.requests[0]!.headers)).to.deep.equal(names(real!.headers));
      // The record forwarded is the record the log serves.
      // (A list from the oldest reads the store: once the materializer has stored them, which a loaded machine can take a moment over.)
      const page = await eventually(async () => {
        const p = await client.events.list({ limit: 3 });
        return p.events.length === 3 ? p : undefined;
      });
      expect(app.requests.slice(0, 3).map((r) => r.raw.toString('utf8'))).to.deep.equal(page.events.map((e) => JSON.stringify(e)));
    } finally {
      expect(await proc.kill(), 'exits 0 on ^C').to.equal(0);
      await app.close();
    }
  });

  it('listen --secret: signs with the given secret; --events filters; an unreachable local app prints the error and goes on', async () => {
    const app = await localApp();
    const secret = 'whsec_' + Buffer.alloc(32, 7).toString('base64');
    const proc = run(['listen', '--forward-to', `http://127.0.0.1:${await freePort()}/nothing-here`, '--events', 'call.ended', '--secret', secret]);
    // The secret from the environment: not on the command line, where `ps` shows it.
    const second = run(['listen', '--forward-to', app.url, '--events', 'call.ended'], { EVENT_PLATFORM_WEBHOOK_SECRET: secret });
    try {
      await Promise.all([proc.line(/^Ready!.*\(call\.ended\)/), second.line(/^Ready!/)]);
      // A secret the user gave is theirs already: named by its last characters, never echoed.
      expect(await proc.line(/signing secret/)).to.include(secret.slice(-4)).and.not.include(secret);
      expect(await second.line(/signing secret/)).to.not.include(secret);
      expect(await proc.line(/--secret.*ps/, 'stderr')).to.match(/EVENT_PLATFORM_WEBHOOK_SECRET/);
      expect(second.stderr.join('\n')).to.not.match(/--secret/);
      const sent = await ingest(api.url, [
        { account_id: account.userId, type: 'call.started', data: {} },
        { account_id: account.userId, type: 'call.ended', data: {} },
      ]);
      expect(await proc.line(/-->/)).to.match(new RegExp(`call\\.ended\\s+${sent[1]!.id}\\s+--> error ECONNREFUSED`));
      await second.line(/-->/);
      expect(app.requests).to.have.length(1);
      expect(verifyWebhook(app.requests[0]!.raw, app.requests[0]!.headers, secret).id).to.equal(sent[1]!.id);
      for (const out of [...proc.stdout, ...proc.stderr, ...second.stdout, ...second.stderr]) expect(out).to.not.include(secret);
    } finally {
      await Promise.all([proc.kill(), second.kill()]);
      await app.close();
    }
  });

  it('events tail prints each event as a JSON line; events emit puts events in the log', async () => {
    const tail = run(['events', 'tail', '--types', 'message.sent,call.ended']);
    try {
      await tail.line(/^Listening \(sse\) for message\.sent, call\.ended/, 'stderr');
      const emit = run(['events', 'emit', '--type', 'message.sent', '--count', '2', '--data', '{"text":"hi"}']);
      expect(await emit.exited).to.equal(0);
      const emitted = emit.stdout.filter(Boolean).map((l) => l.split(/\s+/));
      expect(emitted).to.have.length(2);
      expect(emitted.every(([type, id, cursor]) => type === 'message.sent' && /^evt_/.test(id!) && /^c1_/.test(cursor!))).to.equal(true);
      await ingest(api.url, [{ account_id: account.userId, type: 'call.started', data: {} }]); // filtered out
      await eventually(async () => (tail.stdout.filter(Boolean).length >= 2 ? true : undefined), 30_000);
      const records = tail.stdout.filter(Boolean).map((l) => JSON.parse(l));
      expect(records.map((r) => r.id)).to.deep.equal(emitted.map((e) => e[1]));
      expect(records[0]).to.deep.include({ type: 'message.sent', data: { text: 'hi' } });
    } finally {
      expect(await tail.kill()).to.equal(0);
    }
  });

  it('webhooks list, webhooks test (the ping is delivered and its attempt shown) and webhooks deliveries (the search)', async () => {
    const client = new EventPlatform({ baseUrl: api.url, apiKey: account.apiKey });
    const empty = run(['webhooks', 'list']);
    expect(await empty.exited).to.equal(0);
    expect(empty.stderr).to.include('No webhook subscriptions.');
    const hook = await client.webhooks.create({ url: receiver.url('/cli-test'), events: ['call.ended', 'message.sent'], ordering: 'fifo' });
    const list = run(['webhooks', 'list']);
    expect(await list.exited).to.equal(0);
    expect(list.stdout[0]).to.include(hook.id).and.include('enabled').and.include('fifo').and.include('call.ended,message.sent').and.include(receiver.url('/cli-test'));
    const json = run(['webhooks', 'list', '--json']);
    expect(await json.exited).to.equal(0);
    expect(JSON.parse(json.stdout.join('\n')).map((h: { id: string }) => h.id)).to.deep.equal([hook.id]);

    const test = run(['webhooks', 'test', hook.id]);
    expect(await test.exited).to.equal(0);
    const eventId = /^Sent webhook\.ping (evt_\w+) to wh_/.exec(test.stdout[0]!)![1];
    expect(test.stdout[1]).to.match(/^Attempt 1: ok 200 \(\d+ ms\)$/);
    const [got] = await receiver.waitFor('/cli-test', 1);
    expect(verifyWebhook(got!.raw, got!.headers, hook.secret)).to.include({ id: eventId, type: 'webhook.ping' });

    const search = run(['webhooks', 'deliveries', '--webhook', hook.id, '--outcome', 'ok', '--status', '2xx']);
    expect(await search.exited).to.equal(0);
    expect(search.stdout.filter(Boolean)).to.have.length(1);
    expect(search.stdout[0]).to.include(hook.id).and.include('webhook.ping').and.include('ok').and.include('200').and.include(eventId!);
    const none = run(['webhooks', 'deliveries', '--outcome', 'failed', '--json']);
    expect(await none.exited).to.equal(0);
    expect(none.stdout.filter(Boolean)).to.deep.equal([]);
    const bad = run(['webhooks', 'deliveries', '--status', '9xx']);
    expect(await bad.exited).to.equal(1);
    expect(bad.stderr.join('\n')).to.match(/400 validation_failed.*status/);
  });

  it('event-types lists each type and when it is fired; --json prints the catalog with the data schemas', async () => {
    const list = run(['event-types']);
    expect(await list.exited).to.equal(0);
    expect(list.stdout.filter(Boolean).map((l) => l.split(/\s+/)[0])).to.deep.equal([...EVENT_TYPES]);
    expect(list.stdout.find((l) => l.startsWith('call.ended'))).to.match(/^call\.ended\s+The call hangs up\.$/);
    const json = run(['event-types', '--json']);
    expect(await json.exited).to.equal(0);
    const catalog = JSON.parse(json.stdout.join('\n')) as { type: string; data_schema: { properties: object } }[];
    expect(catalog.map((t) => t.type)).to.deep.equal([...EVENT_TYPES]);
    expect(catalog.find((t) => t.type === 'message.sent')!.data_schema.properties).to.include.keys('to', 'text');
  });

  it('runs through npx from the packed package (the bin, its shebang and the files list)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'client-pack-'));
    const packed = execFileSync('npm', ['pack', '--ignore-scripts', '--pack-destination', dir], { cwd: join(dirname(cli), '..'), env: process.env }).toString().trim().split('\n').pop()!;
    const client = new EventPlatform({ baseUrl: api.url, apiKey: account.apiKey });
    const hook = await client.webhooks.create({ url: receiver.url('/cli-npx'), events: ['*'] });
    // Not execFileSync: the API answering it runs in this process.
    const { stdout: out } = await promisify(execFile)('npx', ['--yes', '--package', join(dir, packed), '--', 'event-platform', 'webhooks', 'list', '--json'], {
      cwd: dir,
      env: { ...process.env, EVENT_PLATFORM_API_URL: api.url, EVENT_PLATFORM_API_KEY: account.apiKey },
    });
    expect(JSON.parse(out).map((h: { id: string }) => h.id)).to.deep.equal([hook.id]);
  });

  it('exit codes: 2 for a usage error (no key, unknown command), 1 with the error code for a refused request', async () => {
    const noKey = new Cli(cli, ['webhooks', 'list'], { EVENT_PLATFORM_API_URL: api.url });
    expect(await noKey.exited).to.equal(2);
    expect(noKey.stderr[0]).to.match(/API key is needed/);
    const unknown = run(['frobnicate']);
    expect(await unknown.exited).to.equal(2);
    const badKey = run(['webhooks', 'list', '--api-key', 'svc_not-a-real-key']);
    expect(await badKey.exited).to.equal(1);
    expect(badKey.stderr.join('\n')).to.match(/^event-platform: 401 unauthorized: /m);
    const missing = run(['webhooks', 'test', 'wh_000000000000000000000000']);
    expect(await missing.exited).to.equal(1);
    expect(missing.stderr[0]).to.match(/404 not_found/);
  });
});

/** A stand-in API on every interface that records what reaches it and answers 401. */
async function recordingApi(): Promise<{ port: number; seen: IncomingHttpHeaders[]; close: () => Promise<void> }> {
  const seen: IncomingHttpHeaders[] = [];
  const server = http.createServer((req, res) => {
    seen.push(req.headers);
    res.writeHead(401, { 'content-type': 'application/json', 'www-authenticate': 'Bearer' }).end(JSON.stringify({ error: { code: 'unauthorized', message: 'no', request_id: 'r' } }));
  });
  await new Promise<void>((resolve) => server.listen(0, resolve)); // '::', both families
  return { port: (server.address() as AddressInfo).port, seen, close: () => new Promise((r) => server.close(() => r())) };
}

/** This machine's first address that is not loopback, where one exists; else one where nothing answers. */
function outsideAddress(): string {
  for (const addrs of Object.values(networkInterfaces())) for (const a of addrs ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  return '192.0.2.1';
}

describe('CLI credentials on the command line and over plain HTTP (a spawned process, a stand-in API)', function () {
  this.timeout(60_000);
  let cli: string;
  let api: Awaited<ReturnType<typeof recordingApi>>;
  const KEY = 'svc_' + 'k'.repeat(43);
  const runCli = (args: string[], env: Record<string, string> = {}) => new Cli(cli, args, env);

  before(async () => {
    cli = join(await buildClient(), 'cli.js');
    api = await recordingApi();
  });
  after(() => api.close());

  it('refuses plain http:// to an API that is not on loopback, before sending anything; --insecure-http allows it', async () => {
    const url = `http://${outsideAddress()}:${api.port}`;
    for (const proc of [runCli(['webhooks', 'list', '--api-url', url], { EVENT_PLATFORM_API_KEY: KEY }), runCli(['webhooks', 'list'], { EVENT_PLATFORM_API_KEY: KEY, EVENT_PLATFORM_API_URL: url })]) {
      expect(await proc.exited, proc.stderr.join('\n')).to.equal(2);
      expect(proc.stderr[0]).to.match(/plain http.*--insecure-http/);
    }
    expect(api.seen, 'the key was sent in clear').to.have.length(0);
    if (url.includes('192.0.2.1')) return; // no outside address here to serve the stand-in on
    const allowed = runCli(['webhooks', 'list', '--api-url', url, '--insecure-http'], { EVENT_PLATFORM_API_KEY: KEY });
    expect(await allowed.exited).to.equal(1);
    expect(allowed.stderr.join('\n')).to.match(/401 unauthorized/);
    expect(api.seen.map((h) => h['authorization'] ?? h['x-api-key'])).to.deep.equal([`Bearer ${KEY}`]);
  });

  it('takes plain http:// to loopback (localhost, 127.0.0.1, [::1]) without a flag', async () => {
    for (const host of ['localhost', '127.0.0.1', '[::1]']) {
      const proc = runCli(['webhooks', 'list', '--api-url', `http://${host}:${api.port}`], { EVENT_PLATFORM_API_KEY: KEY });
      expect(await proc.exited, `${host}: ${proc.stderr.join('\n')}`).to.equal(1);
      expect(proc.stderr.join('\n')).to.match(/401 unauthorized/);
    }
  });

  it('warns when --api-key is on the command line (visible in ps), and not when it comes from the environment', async () => {
    const argv = runCli(['webhooks', 'list', '--api-key', KEY, '--api-url', `http://127.0.0.1:${api.port}`]);
    expect(await argv.exited).to.equal(1);
    expect(argv.stderr[0]).to.match(/--api-key.*ps.*EVENT_PLATFORM_API_KEY/);
    expect(argv.stderr.join('\n')).to.not.include(KEY);
    const fromEnv = runCli(['webhooks', 'list', '--api-url', `http://127.0.0.1:${api.port}`], { EVENT_PLATFORM_API_KEY: KEY });
    expect(await fromEnv.exited).to.equal(1);
    expect(fromEnv.stderr.join('\n')).to.not.match(/--api-key/);
  });
});
