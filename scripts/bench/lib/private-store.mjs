// A FerretDB (and Kafka) of a micro-benchmark's own, through scripts/infra under INFRA_INSTANCE
// `instance`, wiped before; or the one at MONGO_URL when `--pid <its pid>` is given (`--data` its
// data directory). `stop()` stops it keeping its files (to measure them), `down()` wipes it unless
// `--keep`. FerretDB's pid is for reading its CPU (/proc/<pid>/stat).
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { infraCache, root } from './paths.mjs';

export function privateStore(instance, args) {
  if (process.env.MONGO_URL && args.pid) return { url: process.env.MONGO_URL, pid: Number(args.pid), dataDir: args.data, stop: null, down: () => {} };
  const env = { ...process.env, INFRA_INSTANCE: instance };
  delete env.KAFKA_BROKERS;
  delete env.MONGO_URL;
  const script = (name, a = []) => execFileSync('bash', [join(root, 'scripts', 'infra', name), ...a], { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  script('down.sh', ['--wipe']);
  const out = script('up.sh');
  const url = /MONGO_URL=(\S+)/.exec(out)[1];
  const runDir = `${process.env.EVENT_PLATFORM_RUN ?? join(infraCache, 'run')}-${instance}`;
  const pid = Number(readFileSync(join(runDir, 'ferretdb.pid'), 'utf8').trim());
  return { url, pid, dataDir: join(runDir, 'ferretdb-data'), stop: () => script('down.sh'), down: () => (args.keep ? undefined : script('down.sh', ['--wipe'])) };
}
