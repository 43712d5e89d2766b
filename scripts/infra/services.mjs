// Returns { KAFKA_BROKERS, MONGO_URL }: from the environment when both are set,
// otherwise by running scripts/infra/up.sh (which starts or reuses the services).
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));

export async function ensureServices() {
  const { KAFKA_BROKERS, MONGO_URL } = process.env;
  if (KAFKA_BROKERS && MONGO_URL) return { KAFKA_BROKERS, MONGO_URL };
  // Asynchronous, so that the caller can install other things meanwhile (npm test's tools).
  const child = promisify(execFile)('bash', [join(here, 'up.sh')], { encoding: 'utf8', maxBuffer: 1 << 20 });
  child.child.stderr.pipe(process.stderr);
  const { stdout: out } = await child;
  const found = {};
  for (const line of out.split('\n')) {
    const m = /^(KAFKA_BROKERS|MONGO_URL)=(.+)$/.exec(line.trim());
    if (m) found[m[1]] = m[2];
  }
  if (!found.KAFKA_BROKERS || !found.MONGO_URL) throw new Error(`scripts/infra/up.sh did not report both services:\n${out}`);
  return found;
}
