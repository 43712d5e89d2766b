/**
 * The client tests' API processes: their own topic and database (an API that
 * joins a topic's consumer group takes partitions from the others, and these
 * tests stop and restart theirs), on a fixed port so a restarted process is
 * found at the same address.
 */
import { baseTestEnv } from '../../../shared/test/support/env.js';
import { freePort } from '../../../shared/test/support/wait.js';
import { atRunEnd } from '../../../shared/test/support/cleanup.js';
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
    atRunEnd(() => this.stop());
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
