/**
 * A private Kafka + FerretDB pair for the fault tests (scripts/infra/up.sh with
 * INFRA_INSTANCE): its own run dir and ports, so stopping its broker or its
 * database never touches the shared services other test runs use. The
 * instance name carries a hash of this checkout's path, so two checkouts
 * running their fault tests at once do not stop each other's services.
 * Brought up once per run and wiped when the run ends (FAULTS_KEEP_INFRA=1
 * keeps it running for a faster next run).
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { atRunEnd } from '#test-support/cleanup.js';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..');
const INFRA = join(ROOT, 'scripts', 'infra');

export type Service = 'kafka' | 'ferretdb';
/** One Kafka node of a cluster instance (INFRA_KAFKA_NODES, scripts/infra/lib.sh): kafka-1 is node 1. */
export type KafkaNode = `kafka-${number}`;

export interface Endpoints {
  KAFKA_BROKERS: string;
  MONGO_URL: string;
}

function script(name: string, args: string[], instance: string, timeoutMs = 240_000, env: Record<string, string> = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile('bash', [join(INFRA, name), ...args], { env: { ...process.env, INFRA_INSTANCE: instance, KAFKA_BROKERS: '', MONGO_URL: '', ...env }, timeout: timeoutMs }, (err, stdout, stderr) => {
      if (err) reject(new Error(`${name} ${args.join(' ')} failed: ${err.message}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

function parseEndpoints(out: string): Endpoints {
  const found: Partial<Endpoints> = {};
  for (const line of out.split('\n')) {
    const m = /^(KAFKA_BROKERS|MONGO_URL)=(.+)$/.exec(line.trim());
    if (m) found[m[1] as keyof Endpoints] = m[2];
  }
  if (!found.KAFKA_BROKERS || !found.MONGO_URL) throw new Error(`up.sh did not report both services:\n${out}`);
  return found as Endpoints;
}

export class PrivateInfra {
  private constructor(
    readonly instance: string,
    readonly endpoints: Endpoints,
  ) {}

  /** `env`: settings for up.sh on the instance's first start (INFRA_KAFKA_NODES). */
  static async up(instance: string, env: Record<string, string> = {}): Promise<PrivateInfra> {
    return new PrivateInfra(instance, parseEndpoints(await script('up.sh', [], instance, 240_000, env)));
  }

  /** Kills one process (SIGKILL, a crash: no shutdown, nothing handed over), keeping its data and ports. */
  async kill(service: Service | KafkaNode): Promise<void> {
    await script('kill.sh', [service], this.instance);
  }

  /** Stops one service (SIGTERM, as an operator or an orchestrator would), keeping its data and port. */
  async stop(service: Service): Promise<void> {
    await script('down.sh', ['--only', service], this.instance);
  }

  /** Freezes one service in place (SIGSTOP): connections stay open, nothing is answered. */
  async freeze(service: Service): Promise<void> {
    await script('freeze.sh', [service], this.instance);
  }

  async thaw(service: Service): Promise<void> {
    await script('freeze.sh', ['--thaw', service], this.instance);
  }

  /** Starts whatever is stopped; the services come back on the same ports. */
  async start(): Promise<void> {
    const now = parseEndpoints(await script('up.sh', [], this.instance));
    if (now.KAFKA_BROKERS !== this.endpoints.KAFKA_BROKERS || now.MONGO_URL !== this.endpoints.MONGO_URL) {
      throw new Error(`the private services came back on other ports: ${JSON.stringify(now)} (were ${JSON.stringify(this.endpoints)})`);
    }
  }

  async wipe(): Promise<void> {
    await script('down.sh', ['--wipe'], this.instance, 90_000);
  }
}

let shared: Promise<PrivateInfra> | null = null;

/**
 * A private instance whose Kafka is a cluster of three KRaft nodes (replication
 * factor 3, min.insync.replicas 2), beside the run's single-node one; started
 * on first use and wiped at the end of the run.
 */
let cluster3: Promise<PrivateInfra> | null = null;
export function privateKafkaCluster(): Promise<PrivateInfra> {
  cluster3 ??= (async () => {
    const instance = `faults-rf3-${createHash('sha256').update(ROOT).digest('hex').slice(0, 8)}`;
    const infra = await PrivateInfra.up(instance, { INFRA_KAFKA_NODES: '3' });
    if (process.env.FAULTS_KEEP_INFRA !== '1') atRunEnd(() => infra.wipe());
    return infra;
  })();
  return cluster3;
}

/** The run's private instance, started on first use and wiped at the end of the run. */
export function privateInfra(): Promise<PrivateInfra> {
  shared ??= (async () => {
    const instance = process.env.FAULTS_INFRA_INSTANCE ?? `faults-${createHash('sha256').update(ROOT).digest('hex').slice(0, 8)}`;
    const infra = await PrivateInfra.up(instance);
    if (process.env.FAULTS_KEEP_INFRA !== '1') atRunEnd(() => infra.wipe());
    return infra;
  })();
  return shared;
}
