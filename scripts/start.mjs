#!/usr/bin/env node
// `npm start`: brings up Kafka and the MongoDB-wire server (unless KAFKA_BROKERS
// and MONGO_URL are set), then runs one API process on http://127.0.0.1:3000
// and one delivery process. Ctrl-C stops both cleanly; the services keep
// running for the next start (`npm run infra:down` stops them).
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureServices } from './infra/services.mjs';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const services = await ensureServices();
// Development mode, explicitly: only here may a missing JWT_SECRET, INGEST_TOKEN or
// WEBHOOK_SECRET_KEY fall back to its development default (on a loopback HOST).
const env = { NODE_ENV: 'development', ...process.env, ...services };
console.error(`[start] Kafka ${services.KAFKA_BROKERS}, MongoDB ${services.MONGO_URL}`);

const procs = ['api', 'delivery'].map((name) => {
  const child = spawn(process.execPath, ['--import', 'tsx', join(root, name, 'src', 'main.ts')], { cwd: root, env, stdio: 'inherit' });
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
