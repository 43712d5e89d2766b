import { ConfigError } from './config/env.js';
import type { Logger } from './log.js';
import { startTelemetry } from './telemetry.js';
import { withTimeout } from './timeout.js';

type Hook = { name: string; fn: () => Promise<void> | void };

/**
 * Ordered start-up and shutdown. Components register a stop hook when they
 * start; shutdown runs the hooks in reverse order, each bounded in time, so
 * one stuck dependency cannot hold the process forever.
 */
export class Lifecycle {
  private readonly stops: Hook[] = [];
  private stopping: Promise<void> | null = null;

  constructor(private readonly log: Logger) {}

  onStop(name: string, fn: () => Promise<void> | void): void {
    this.stops.push({ name, fn });
  }

  get isStopping(): boolean {
    return this.stopping !== null;
  }

  /**
   * Runs the stop hooks in reverse order, each bounded by `timeoutMs`, and
   * all of them by `totalMs` (so shutdown fits the orchestrator's grace
   * period before it SIGKILLs): a step starting late gets only what is left
   * of the total, and at least MIN_STEP_MS so that the last steps (closing
   * the database client) still run.
   */
  stop(timeoutMs = 10000, totalMs = Infinity): Promise<void> {
    this.stopping ??= this.runStops(timeoutMs, totalMs);
    return this.stopping;
  }

  private async runStops(timeoutMs: number, totalMs: number): Promise<void> {
    const deadline = Date.now() + totalMs;
    for (const hook of [...this.stops].reverse()) {
      const budget = Math.min(timeoutMs, Math.max(MIN_STEP_MS, deadline - Date.now()));
      let timer: NodeJS.Timeout | undefined;
      try {
        await Promise.race([
          Promise.resolve().then(hook.fn),
          new Promise((_, reject) => {
            timer = setTimeout(() => reject(new Error(`timed out after ${budget} ms`)), budget);
          }),
        ]);
      } catch (err) {
        this.log.warn({ err, hook: hook.name }, 'shutdown step failed');
      } finally {
        clearTimeout(timer);
      }
    }
  }
}

/** What a shutdown step gets at least, even past the total budget. */
const MIN_STEP_MS = 200;

/** How long the exit waits for the spans still batched to be exported. */
const TELEMETRY_FLUSH_MS = 5000;

/** What a process's entry point starts: something that logs and closes. */
interface RunningProcess {
  log: Pick<Logger, 'info'>;
  close(): Promise<void>;
}

/**
 * The entry point of a process (api, delivery): loads the configuration (a
 * ConfigError is printed and exits 2), starts the process, and closes it once
 * on SIGTERM or SIGINT (exit 0 when the close finished, 1 when it failed).
 */
export function runProcess<C>(name: string, load: () => C, start: (config: C) => Promise<RunningProcess>, env: NodeJS.ProcessEnv = {}): void {
  const main = async (): Promise<void> => {
    let config: C;
    try {
      config = load();
    } catch (err) {
      if (!(err instanceof ConfigError)) throw err;
      console.error(err.message);
      process.exit(2);
    }
    // Tracing, when `env` has OTEL_EXPORTER_OTLP_ENDPOINT (telemetry.ts); stopped last, flushing its spans.
    const stopTelemetry = await startTelemetry(name, env);
    const running = await start(config);
    let exiting = false;
    const shutdown = (signal: string): void => {
      if (exiting) return;
      exiting = true;
      running.log.info({ signal }, 'shutting down');
      running
        .close()
        // A collector that does not answer must not hold the exit past a pod's termination grace period.
        .then(() => (stopTelemetry ? withTimeout(stopTelemetry(), TELEMETRY_FLUSH_MS).catch(() => undefined) : undefined))
        .then(() => process.exit(0))
        .catch(() => process.exit(1));
    };
    process.on('SIGTERM', () => shutdown('SIGTERM'));
    process.on('SIGINT', () => shutdown('SIGINT'));
  };
  main().catch((err: unknown) => {
    console.error(`${name} failed to start:`, err);
    process.exit(1);
  });
}
