/**
 * Recovers from a MongoDB driver hang found by the fault tests (mongodb 7.9,
 * polling server monitor, which is what servers without `topologyVersion`
 * such as FerretDB get): when the server closes its connections while the
 * driver's monitor starts a check on its own, closing connection, that check
 * never settles. The monitor then never checks again, the server stays
 * "Unknown", and every operation fails server selection (503) until the
 * process restarts, although the server is back.
 *
 * A check normally ends within connectTimeoutMS (polling) or
 * heartbeatFrequencyMS + connectTimeoutMS (streaming). If one has been
 * pending far longer than that, the client is closed and connected again:
 * a new topology with a new monitor. Collection handles stay valid across the
 * reconnect; operations in between fail as "not connected" (a 503).
 */
import { withTimeout } from '../timeout.js';
import type { MongoClient } from 'mongodb';
import type { Logger } from '../log.js';

interface WatchdogOptions {
  /** A heartbeat pending longer than this is considered stuck. */
  stuckAfterMs: number;
  /** How often to look. */
  everyMs: number;
  /** Bound on closing the client during a recovery. */
  closeTimeoutMs: number;
  now?: () => number;
}

const DEFAULT_WATCHDOG: WatchdogOptions = { stuckAfterMs: 30_000, everyMs: 5_000, closeTimeoutMs: 10_000 };

export class MonitorWatchdog {
  private pendingSince: number | null = null;
  private busy = false;
  /** True after a close whose reconnect has not succeeded yet. */
  private disconnected = false;
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;
  recoveries = 0;
  private readonly now: () => number;

  constructor(
    private readonly client: MongoClient,
    private readonly log: Logger,
    private readonly opts: WatchdogOptions = DEFAULT_WATCHDOG,
  ) {
    this.now = opts.now ?? Date.now;
    client.on('serverHeartbeatStarted', () => {
      this.pendingSince ??= this.now();
    });
    client.on('serverHeartbeatSucceeded', () => {
      this.pendingSince = null;
    });
    client.on('serverHeartbeatFailed', () => {
      this.pendingSince = null;
    });
  }

  start(): void {
    this.timer ??= setInterval(() => void this.check(), this.opts.everyMs);
    this.timer.unref();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** One look; resolves true when it recovered (or retried recovering) the client. */
  async check(): Promise<boolean> {
    if (this.busy || this.stopped) return false;
    const stuck = this.pendingSince !== null && this.now() - this.pendingSince > this.opts.stuckAfterMs;
    if (!stuck && !this.disconnected) return false;
    this.busy = true;
    try {
      if (stuck) {
        this.log.warn({ pendingMs: this.now() - (this.pendingSince as number) }, 'MongoDB server monitor stuck; reconnecting the client');
        this.pendingSince = null;
        this.disconnected = true;
        this.recoveries += 1;
        await withTimeout(this.client.close(), this.opts.closeTimeoutMs).catch((err: unknown) => this.log.warn({ err }, 'closing the stuck MongoDB client failed'));
      }
      if (this.stopped) return true;
      await this.client.connect();
      this.disconnected = false;
      this.log.info('MongoDB client reconnected');
      return true;
    } catch (err) {
      this.log.warn({ err }, 'MongoDB client reconnect failed; retrying');
      return true;
    } finally {
      this.busy = false;
    }
  }
}
