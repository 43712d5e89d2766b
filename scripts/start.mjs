#!/usr/bin/env node
// `npm start`: brings up Kafka and the MongoDB-wire server (unless KAFKA_BROKERS
// and MONGO_URL are set), then runs one API process on http://127.0.0.1:3000
// and one delivery process. Ctrl-C stops both cleanly; the services keep
// running for the next start (`npm run infra:down` stops them). Once the API
// is ready it prints where everything is (the banner below). Logs are JSON,
// shown by pino-pretty when stdout is a terminal in development.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureServices } from './infra/services.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const services = await ensureServices();
// Development mode, explicitly: only here may a missing JWT_SECRET, INGEST_TOKEN or
// WEBHOOK_SECRET_KEY fall back to its development default (on a loopback HOST).
const env = { NODE_ENV: 'development', ...process.env, ...services };
console.error(`[start] Kafka ${services.KAFKA_BROKERS}, MongoDB ${services.MONGO_URL}`);

// On a terminal in development the JSON logs are shown by pino-pretty (LOG_FORMAT=json keeps
// them as they are); anywhere else (a pipe, a file, production) they stay JSON, one object a line.
const pretty = process.stdout.isTTY && env.NODE_ENV === 'development' && env.LOG_FORMAT !== 'json' ? await loadPretty() : null;

async function loadPretty() {
  try {
    return (await import('pino-pretty')).default;
  } catch {
    return null; // not installed (npm install --omit=dev): JSON it is
  }
}

const procs = ['api', 'delivery'].map((name) => {
  const stdio = pretty ? ['inherit', 'pipe', 'inherit'] : 'inherit';
  const child = spawn(process.execPath, ['--import', 'tsx', join(root, name, 'src', 'main.ts')], { cwd: root, env, stdio });
  // One pretty stream per process, so lines of the two never interleave mid-line.
  if (pretty) child.stdout.pipe(pretty({ colorize: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname,process,instance' }));
  child.on('exit', (code, signal) => {
    console.error(`[start] ${name} exited (${signal ?? code})`);
    stopAll(code ?? 1);
  });
  return child;
});

let stopping = false;
function stopAll(code) {
  if (stopping) return;
  stopping = true;
  for (const p of procs) if (p.exitCode === null) p.kill('SIGTERM');
  setTimeout(() => process.exit(code), 12_000).unref();
  Promise.all(procs.map((p) => (p.exitCode === null ? new Promise((r) => p.on('exit', r)) : null))).then(() => process.exit(code));
}
process.on('SIGINT', () => stopAll(0));
process.on('SIGTERM', () => stopAll(0));

// Once the API answers /readyz: where everything is, and how to stop.
const host = env.HOST || '127.0.0.1';
const apiUrl = `http://${host.includes(':') ? `[${host}]` : host}:${env.PORT || '3000'}`;
const ready = await waitReady(`${apiUrl}/readyz`, 180_000);
if (ready && !stopping) console.error(banner());

async function waitReady(url, ms) {
  const until = Date.now() + ms;
  while (Date.now() < until && !stopping) {
    const ok = await fetch(url).then((r) => r.ok, () => false);
    if (ok) return true;
    await new Promise((r) => setTimeout(r, 500));
  }
  return false;
}

/** The development ingest token, read from where it is defined (api/src/config.ts, DEV_INGEST_TOKEN). */
function devIngestToken() {
  const m = /export const DEV_INGEST_TOKEN = '([^']+)'/.exec(readFileSync(join(root, 'api', 'src', 'config.ts'), 'utf8'));
  return m ? m[1] : null;
}

function banner() {
  const dev = env.NODE_ENV === 'development';
  const token = env.INGEST_TOKEN
    ? 'INGEST_TOKEN from your environment'
    : dev
      ? `${devIngestToken() ?? '(see api/src/config.ts)'} (the development default, DEV_INGEST_TOKEN in api/src/config.ts; npm run emit uses it; set INGEST_TOKEN for your own)`
      : 'INGEST_TOKEN (required outside development)';
  return [
    '',
    `  Event platform, ${dev ? 'development mode (NODE_ENV=development, development secrets where unset)' : `NODE_ENV=${env.NODE_ENV}`}`,
    `  API           ${apiUrl}   (OpenAPI: ${apiUrl}/api/openapi.json)`,
    `  Dashboard     ${apiUrl}/dashboard`,
    `  Ingest token  ${token}`,
    "  Try it        the README's \"Try it in five commands\", in another shell",
    '  Stop          Ctrl-C (Kafka and FerretDB keep running for the next start; npm run infra:down stops them)',
    '',
  ].join('\n');
}
