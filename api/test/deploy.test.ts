/**
 * The shipped deployment (docker-compose.yml, deploy/): what its gateway lets
 * through, TLS, and what it logs. The nginx config is run for real against a
 * test API, and the compose file is checked with Compose v2: `npm test`
 * provides both (NGINX_BIN, OPENSSL_BIN, COMPOSE_BIN from scripts/infra/test-tools.mjs:
 * Debian's nginx-light, Compose built from its Go module into the cache); without
 * them these tests fail saying how to get them, never skip.
 */
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import type { RunningApi } from '../src/server.js';
import { bearer, createAccount } from './support/accounts.js';
import { startTestApi } from './support/api.js';
import { freePort } from '#test-support/wait.js';

const root = process.cwd();
const nginxConf = readFileSync(join(root, 'deploy/nginx.conf'), 'utf8');
const composeText = readFileSync(join(root, 'docker-compose.yml'), 'utf8');

function which(bin: string): string | null {
  const res = spawnSync('sh', ['-c', `command -v ${bin}`], { encoding: 'utf8' });
  return res.status === 0 ? res.stdout.trim() : null;
}

function composeCommand(): string[] {
  if (process.env.COMPOSE_BIN) return [process.env.COMPOSE_BIN];
  if (spawnSync('docker', ['compose', 'version'], { encoding: 'utf8' }).status === 0) return ['docker', 'compose'];
  throw new Error('no Compose v2: run the tests with npm test (it builds one: scripts/infra/compose.sh), or set COMPOSE_BIN');
}

/**
 * Resolves once COMPOSE_BIN exists. npm test starts the build at its own start and runs this file
 * late; the build's failure (COMPOSE_BIN.failed, with its output) fails the tests that need it.
 */
async function composeBuilt(): Promise<void> {
  const bin = process.env.COMPOSE_BIN;
  if (!bin || process.env.COMPOSE_BUILDING !== '1') return;
  for (;;) {
    if (existsSync(bin)) return;
    if (existsSync(`${bin}.failed`)) throw new Error(`building Compose failed: ${readFileSync(`${bin}.failed`, 'utf8').slice(-2000)}`);
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
}

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** One request with the path sent byte for byte as given (no client-side normalisation). */
function request(url: string, method: string, path: string, opts: { headers?: Record<string, string>; ca?: string; abortAfterHeaders?: boolean } = {}): Promise<Answer> {
  const u = new URL(url);
  const mod = u.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = mod.request({ host: u.hostname, port: u.port, method, path, headers: opts.headers, ca: opts.ca, servername: 'localhost', agent: false }, (res) => {
      if (opts.abortAfterHeaders) {
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: '' });
        req.destroy();
        return;
      }
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('shipped deployment', function () {
  this.timeout(120_000);

  describe('deploy/nginx.conf, read', () => {
    it('logs $uri, never the query string ($request_uri, $request, $args, $query_string)', () => {
      const formats = [...nginxConf.matchAll(/log_format\s+(\w+)\s+([^;]+);/g)];
      expect(formats.map((m) => m[1])).to.deep.equal(['gateway']);
      expect(formats[0]![2]).to.include('$uri');
      expect(formats[0]![2]).to.not.match(/\$request_uri|\$request\b|\$args|\$query_string|\$arg_/);
      const logs = [...nginxConf.matchAll(/access_log\s+([^;]+);/g)].map((m) => m[1]!.trim());
      expect(logs.length).to.be.greaterThan(0);
      for (const log of logs) expect(log).to.match(/ gateway$/);
    });

    it('routes only the public prefixes and answers everything else itself with 404', () => {
      const locations = [...nginxConf.matchAll(/location\s+([^{]+?)\s*\{/g)].map((m) => m[1]);
      expect(locations).to.deep.equal(['/', '/api/', '= /dashboard', '/dashboard/', '= /healthz', '/']);
      expect(nginxConf).to.not.match(/location[^{]*(metrics|internal|readyz)/i);
    });
  });

  describe('docker-compose.yml', () => {
    // npm test builds Compose in the background on a machine that has none yet (scripts/test.mjs): wait for it.
    before(async function () {
      this.timeout(20 * 60_000);
      await composeBuilt();
    });

    const secrets = { JWT_SECRET: 'j'.repeat(40), INGEST_TOKEN: 'i'.repeat(30), WEBHOOK_SECRET_KEY: Buffer.alloc(32, 3).toString('base64'), MONGO_PASSWORD: 'm'.repeat(24) };
    const bare = (): Record<string, string> => {
      const env: Record<string, string> = {};
      for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !(k in secrets) && !['METRICS_TOKEN', 'PUBLIC_BASE_URL', 'MONGO_USER'].includes(k)) env[k] = v;
      return env;
    };

    interface ComposeService {
      ports?: { target: number; published: string }[];
      environment?: Record<string, string | null>;
      volumes?: { type: string; source?: string; target: string }[];
      restart?: string;
      deploy?: { restart_policy?: { condition?: string } };
      healthcheck?: { test?: string[]; start_period?: string; interval?: string };
      command?: string[];
    }
    let resolved: { services: Record<string, ComposeService> } | null = null;
    /** The file as Compose v2 resolves it (`config --format json`), with the three secrets set. */
    const config = (): { services: Record<string, ComposeService> } => {
      if (resolved) return resolved;
      const [bin, ...pre] = composeCommand();
      const out = execFileSync(bin!, [...pre, '-f', 'docker-compose.yml', 'config', '--format', 'json'], { cwd: root, env: { ...bare(), ...secrets }, encoding: 'utf8' });
      resolved = JSON.parse(out) as { services: Record<string, ComposeService> };
      return resolved;
    };

    it("keeps Kafka's log on its volume: every log dir is a mounted volume and every volume is a log dir", () => {
      const kafka = config().services.kafka!;
      const logDirs = String(kafka.environment?.KAFKA_LOG_DIRS ?? '').split(',').filter(Boolean);
      // Unset, the apache/kafka image writes to /tmp/kraft-combined-logs inside the container.
      expect(logDirs.length, 'KAFKA_LOG_DIRS').to.be.greaterThan(0);
      const mounted = (kafka.volumes ?? []).filter((v) => v.type === 'volume').map((v) => v.target);
      expect(mounted.sort()).to.deep.equal(logDirs.sort());
      expect(kafka.environment?.KAFKA_LOG_DIR, 'KAFKA_LOG_DIR would be a second, unmounted log dir').to.equal(undefined);
    });

    it('sets the broker deliberately: every append flushed (one broker, no replica), offsets kept far longer than the log', () => {
      const env = config().services.kafka!.environment ?? {};
      const voters = String(env.KAFKA_CONTROLLER_QUORUM_VOTERS).split(',');
      // A single broker: nothing replicates, so only a flush makes an acknowledged event survive a host crash.
      expect(voters).to.have.length(1);
      expect(env.KAFKA_LOG_FLUSH_INTERVAL_MESSAGES).to.equal('1');
      expect(env.KAFKA_MIN_INSYNC_REPLICAS).to.equal('1');
      for (const rf of ['KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR', 'KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR']) expect(env[rf], rf).to.equal(String(voters.length));
      const retentionMs = Number(env.KAFKA_LOG_RETENTION_MS);
      expect(retentionMs, 'KAFKA_LOG_RETENTION_MS').to.equal(7 * 24 * 3_600_000);
      // A group's offsets must outlive the events they point at: an expired offset makes the delivery group a new one, placed at the end.
      const offsetsMs = Number(env.KAFKA_OFFSETS_RETENTION_MINUTES) * 60_000;
      expect(offsetsMs, 'KAFKA_OFFSETS_RETENTION_MINUTES').to.be.at.least(10 * retentionMs);
    });

    it('restarts every service after a crash or an exit (a process that exits at start included)', () => {
      const services = config().services;
      expect(Object.keys(services).sort()).to.deep.equal(['api', 'delivery', 'gateway', 'kafka', 'mongo']);
      for (const [name, s] of Object.entries(services)) expect(s.restart, name).to.equal('unless-stopped');
    });

    it('gives MongoDB credentials, and the processes a connection string with them', () => {
      const { mongo, api, delivery } = config().services;
      expect(mongo!.environment).to.include({ MONGO_INITDB_ROOT_USERNAME: 'event_platform', MONGO_INITDB_ROOT_PASSWORD: secrets.MONGO_PASSWORD });
      for (const s of [api!, delivery!]) {
        const url = new URL(String(s.environment?.MONGO_URL));
        expect([url.username, url.password, url.host, url.searchParams.get('authSource')]).to.deep.equal(['event_platform', secrets.MONGO_PASSWORD, 'mongo:27017', 'admin']);
      }
    });

    it('health-checks Kafka and MongoDB with a start period, MongoDB without starting mongosh', () => {
      const { mongo, kafka } = config().services;
      for (const [name, s] of [['mongo', mongo!], ['kafka', kafka!]] as const) expect(s.healthcheck?.start_period, name).to.match(/^\d+m|^[3-9]\ds|^\d{3,}s/);
      expect(mongo!.healthcheck?.test?.join(' ')).to.not.include('mongosh');
    });

    it('requires the four secrets and publishes only the gateway (Compose v2 `config`)', () => {
      expect(composeText).to.match(/\$\{JWT_SECRET:\?/);
      const [bin, ...pre] = composeCommand();
      for (const missing of Object.keys(secrets)) {
        const env = { ...bare(), ...secrets };
        delete (env as Record<string, string>)[missing];
        const res = spawnSync(bin!, [...pre, '-f', 'docker-compose.yml', 'config', '-q'], { cwd: root, env, encoding: 'utf8' });
        expect(res.status, missing).to.not.equal(0);
        expect(res.stderr).to.include(`required variable ${missing} is missing`);
      }
      const published = Object.entries(config().services).flatMap(([name, s]) => (s.ports ?? []).map((p) => `${name}:${p.published}->${p.target}`));
      expect(published.sort()).to.deep.equal(['gateway:443->443', 'gateway:80->80']);
      for (const name of ['api', 'delivery']) {
        const { MONGO_PASSWORD: _inTheUrl, ...appSecrets } = secrets;
        expect(config().services[name]!.environment).to.include({ NODE_ENV: 'production', ...appSecrets });
      }
    });
  });

  describe('the gateway, run (nginx with deploy/nginx.conf in front of a test API)', () => {
    let api: RunningApi;
    let nginx: ChildProcess | null = null;
    let dir = '';
    let httpUrl = '';
    let httpsUrl = '';
    let ca = '';

    before(async () => {
      const bin = process.env.NGINX_BIN ?? which('nginx');
      if (!bin || !(process.env.OPENSSL_BIN ?? which('openssl'))) {
        throw new Error('nginx or openssl not installed: run the tests with npm test (it installs them), or apt-get install -y nginx-light openssl');
      }
      api = await startTestApi({ TRUST_PROXY: 'true' });
      dir = mkdtempSync(join(tmpdir(), 'gateway-'));
      // The certificate the way the gateway makes it on first start.
      execFileSync('sh', [join(root, 'deploy/gateway-cert.sh')], { env: { ...process.env, TLS_DIR: join(dir, 'tls') } });
      ca = readFileSync(join(dir, 'tls', 'tls.crt'), 'utf8');
      const [p80, p443] = [await freePort(), await freePort()];
      httpUrl = `http://127.0.0.1:${p80}`;
      httpsUrl = `https://127.0.0.1:${p443}`;
      const site = nginxConf
        .replace('server api:3000;', `server 127.0.0.1:${new URL(api.url).port};`)
        .replace(/listen 80;/, `listen 127.0.0.1:${p80};`)
        .replace(/listen 443 ssl;/, `listen 127.0.0.1:${p443} ssl;`)
        .replaceAll('/var/log/nginx/access.log', join(dir, 'access.log'))
        .replaceAll('/etc/nginx/tls', join(dir, 'tls'));
      writeFileSync(join(dir, 'site.conf'), site);
      writeFileSync(
        join(dir, 'nginx.conf'),
        `daemon off;\nworker_processes 1;\nuser root;\npid ${join(dir, 'nginx.pid')};\nerror_log ${join(dir, 'error.log')} warn;\nevents { worker_connections 256; }\nhttp {\n  access_log off;\n  include ${join(dir, 'site.conf')};\n}\n`,
      );
      const test = spawnSync(bin!, ['-t', '-p', dir, '-c', join(dir, 'nginx.conf')], { encoding: 'utf8' });
      expect(test.status, test.stderr).to.equal(0);
      nginx = spawn(bin!, ['-p', dir, '-c', join(dir, 'nginx.conf')], { stdio: 'ignore' });
      for (let i = 0; ; i++) {
        try {
          await request(httpsUrl, 'GET', '/healthz', { ca });
          break;
        } catch (err) {
          if (i > 100) throw err;
          await new Promise((r) => setTimeout(r, 50));
        }
      }
    });

    after(() => {
      nginx?.kill('SIGTERM');
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it('passes `nginx -t`, redirects plain HTTP to HTTPS and sends HSTS', async () => {
      const plain = await request(httpUrl, 'GET', '/api/auth/me?x=1');
      expect(plain.status).to.equal(301);
      expect(plain.headers.location).to.match(/^https:\/\/[^/]+\/api\/auth\/me\?x=1$/);
      for (const path of ['/healthz', '/api/auth/me', '/nope']) {
        const res = await request(httpsUrl, 'GET', path, { ca });
        expect(res.headers['strict-transport-security'], path).to.equal('max-age=31536000');
        expect(res.headers['x-content-type-options'], path).to.equal('nosniff');
      }
      expect((await request(httpsUrl, 'GET', '/healthz', { ca })).status).to.equal(200);
      expect((await request(httpsUrl, 'GET', '/api/auth/me', { ca })).status).to.equal(401);
      expect((await request(httpsUrl, 'GET', '/dashboard', { ca })).status).to.equal(200);
    });

    it('answers every spelling of /metrics, /readyz and /internal/ itself with 404: none reaches the API', async () => {
      const spellings = ['/metrics', '/metrics/', '/METRICS', '/Metrics', '//metrics', '/%6detrics', '/%6Detrics', '/metrics;x', '/metrics?x', '/./metrics', '/api/../metrics', '/api/%2e%2e/metrics', '/api/..%2fmetrics', '/dashboard/../metrics', '/readyz', '/internal/v1/events', '/INTERNAL/v1/events', '/Internal/V1/Events/', '//internal/v1/events', '/api/../internal/v1/events'];
      for (const path of spellings) {
        for (const method of ['GET', 'POST']) {
          const res = await request(httpsUrl, method, path, { ca, headers: { 'content-type': 'application/json', ...bearer(api.deps.config.ingestToken) } });
          expect(res.status, `${method} ${path}`).to.equal(404);
          // The API stamps X-Request-Id on every answer; the gateway's own 404 has none.
          expect(res.headers['x-request-id'], `${method} ${path} reached the API`).to.equal(undefined);
        }
      }
    });

    it('keeps stream tokens out of the access log', async () => {
      const acct = await createAccount(api.url);
      const minted = await request(httpsUrl, 'POST', '/api/v1/events/stream-token', { ca, headers: bearer(acct.apiKey) });
      expect(minted.status).to.equal(201);
      const { token, stream_url: streamUrl } = JSON.parse(minted.body) as { token: string; stream_url: string };
      const stream = await request(httpsUrl, 'GET', streamUrl, { ca, abortAfterHeaders: true });
      expect(stream.status).to.equal(200);
      await new Promise((r) => setTimeout(r, 300));
      const log = readFileSync(join(dir, 'access.log'), 'utf8');
      expect(log).to.include('/api/v1/events/stream-token');
      expect(log).to.include('"GET /api/v1/events/stream HTTP/1.1"');
      expect(log).to.not.include(token.slice(0, 20));
      expect(log).to.not.include('token=');
    });
  });
});
