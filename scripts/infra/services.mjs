// Returns { KAFKA_BROKERS, MONGO_URL }: from the environment when both are set,
// otherwise by running scripts/infra/up.sh (which starts or reuses the services).
import { execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));

export async function ensureServices() {
  const { KAFKA_BROKERS, MONGO_URL } = process.env;
  if (KAFKA_BROKERS && MONGO_URL) return { KAFKA_BROKERS, MONGO_URL };
  const out = execFileSync('bash', [join(here, 'up.sh')], { stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' });
  const found = {};
  for (const line of out.split('\n')) {
    const m = /^(KAFKA_BROKERS|MONGO_URL)=(.+)$/.exec(line.trim());
    if (m) found[m[1]] = m[2];
  }
  if (!found.KAFKA_BROKERS || !found.MONGO_URL) throw new Error(`scripts/infra/up.sh did not report both services:\n${out}`);
  return found;
}
