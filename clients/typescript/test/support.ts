/**
 * The client tests' API processes: their own topic and database (an API that
 * joins a topic's consumer group takes partitions from the others, and these
 * tests stop and restart theirs), on a fixed port so a restarted process is
 * found at the same address.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { deliveryTestEnv, startTestDelivery, waitForGroup } from '../../../delivery/test/support/delivery.js';
import { baseTestEnv } from '../../../shared/test/support/env.js';
import { Receiver } from '../../../shared/test/support/receiver.js';
import { freePort } from '../../../shared/test/support/wait.js';
import { atFileEnd } from '../../../shared/test/support/cleanup.js';
import { startTestApi } from '../../../api/test/support/api.js';
import type { RunningApi } from '../../../api/src/server.js';

export function clientTestEnv(): Record<string, string> {
  const base = baseTestEnv();
  return { EVENTS_TOPIC: `${base.EVENTS_TOPIC}-client`, MONGO_DB: `${base.MONGO_DB}_client` };
}

/** An API process that can be stopped and started again on the same port. */
export class RestartableApi {
  private api: RunningApi | null = null;
  port = 0;

  constructor(private readonly overrides: Record<string, string> = {}) {
    atFileEnd(() => this.stop());
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get running(): RunningApi {
    if (!this.api) throw new Error('not running');
    return this.api;
  }

  async start(): Promise<void> {
    if (this.port === 0) this.port = await freePort();
    this.api = await startTestApi({ ...clientTestEnv(), ...this.overrides, PORT: String(this.port) });
  }

  async stop(): Promise<void> {
    const api = this.api;
    this.api = null;
    await api?.close();
  }
}

const PACKAGE_DIR = fileURLToPath(new URL('..', import.meta.url));

let built: Promise<string> | null = null;

/**
 * Builds the package as it would be published (tsc -> clients/typescript/dist)
 * once per run; resolves to dist's directory. The CLI tests run dist/cli.js
 * with plain node, as `npx` would.
 */
export function buildClient(): Promise<string> {
  built ??= new Promise((resolve, reject) => {
    const tsc = join(PACKAGE_DIR, '..', '..', 'node_modules', 'typescript', 'bin', 'tsc');
    execFile(process.execPath, [tsc, '-p', join(PACKAGE_DIR, 'tsconfig.json')], (err, stdout, stderr) => {
      if (err) reject(new Error(`building the client failed:\n${stdout}${stderr}`));
      else resolve(join(PACKAGE_DIR, 'dist'));
    });
  });
  return built;
}

let stack: Promise<{ api: RestartableApi; receiver: Receiver }> | null = null;

/**
 * An API that lets subscriptions reach 127.0.0.1 and a delivery process on
 * the client tests' topic, plus an HTTPS receiver: shared by a file's tests
 * (two delivery processes in different groups would each deliver every event).
 */
export function clientStack(): Promise<{ api: RestartableApi; receiver: Receiver }> {
  stack ??= (async () => {
    // Closed with the file that started it (its API, receiver and delivery process); the next file starts its own.
    atFileEnd(() => {
      stack = null;
    });
    const receiver = await Receiver.start();
    atFileEnd(() => receiver.close());
    const api = new RestartableApi({ INSTANCE_ID: 'client-routes', WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' });
    const env = deliveryTestEnv(receiver.caFile, clientTestEnv());
    await Promise.all([api.start(), startTestDelivery(env)]);
    await waitForGroup(env);
    return { api, receiver };
  })();
  return stack;
}

/**
 * The node that runs the CLI and the docs' examples: this one, or another
 * named by CLIENT_TEST_NODE (a test-only setting) to check the package on
 * another Node major, e.g. `CLIENT_TEST_NODE=/path/to/node24 npm test -- clients/typescript/test/cli.test.ts`.
 */
export const CLI_NODE = process.env.CLIENT_TEST_NODE || process.execPath;
