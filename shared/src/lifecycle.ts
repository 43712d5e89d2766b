import type { Logger } from './log.js';

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

  stop(timeoutMs = 10000): Promise<void> {
    this.stopping ??= this.runStops(timeoutMs);
    return this.stopping;
  }

  private async runStops(timeoutMs: number): Promise<void> {
    for (const hook of [...this.stops].reverse()) {
      let timer: NodeJS.Timeout | undefined;
      try {
        await Promise.race([
          Promise.resolve().then(hook.fn),
          new Promise((_, reject) => {
            timer = setTimeout(() => reject(new Error(`timed out after ${timeoutMs} ms`)), timeoutMs);
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
