/**
 * Picks up deliveries that are due from MongoDB: scheduled retries, and
 * deliveries whose holder died (its lease ran out). Every delivery process
 * runs one; the atomic claim decides which process sends each attempt.
 */
import type { Logger } from '../../shared/src/log.js';
import { claim, findDue, releaseLeases, type DeliveryCollections } from './deliveries.js';
import type { Dispatcher } from './dispatch.js';

export interface SchedulerDeps {
  log: Logger;
  collections: DeliveryCollections;
  dispatcher: Dispatcher;
  owner: string;
  leaseMs: number;
  intervalMs: number;
  clock: () => Date;
}

/** Claims per tick at most: one slow tick must not starve the consumer's own deliveries. */
const MAX_CLAIMS_PER_TICK = 200;

export class RetryScheduler {
  private timer: NodeJS.Timeout | null = null;
  private ticking: Promise<void> | null = null;
  private stopped = false;

  constructor(private readonly deps: SchedulerDeps) {}

  start(): void {
    this.schedule();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.ticking;
  }

  /** One pass: claim due deliveries while this process has free slots. */
  async tick(): Promise<number> {
    const { deps } = this;
    let claimed = 0;
    while (!this.stopped && claimed < MAX_CLAIMS_PER_TICK && deps.dispatcher.room > 0) {
      const candidates = shuffle(await findDue(deps.collections, deps.clock(), deps.dispatcher.room, deps.dispatcher.busySubscriptions()));
      if (candidates.length === 0) break;
      let won = 0;
      for (const seen of candidates) {
        if (this.stopped || deps.dispatcher.room === 0) break;
        // Ours already (queued, sending, or its record still being written): a claim now would
        // fence out our own record and leave the delivery to be sent a second time.
        if (deps.dispatcher.holds(seen._id)) continue;
        // No room for its subscription here: claiming it would only hand it back.
        if (deps.dispatcher.roomFor(seen.subscription_id) === 0) continue;
        const held = await claim(deps.collections, seen, deps.owner, deps.clock(), deps.leaseMs);
        if (!held) continue; // another process took it first
        won++;
        if (deps.dispatcher.enqueue({ delivery: held }) === 'full') await releaseLeases(deps.collections, [held._id], deps.owner, deps.clock());
      }
      claimed += won;
      if (won === 0) break; // all taken by others: look again next tick
    }
    return claimed;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.ticking = this.tick()
        .then(() => undefined)
        .catch((err: unknown) => this.deps.log.warn({ err }, 'could not claim due deliveries; will try again'))
        .finally(() => {
          this.ticking = null;
          this.schedule();
        });
    }, this.deps.intervalMs);
    this.timer.unref();
  }
}

/** Processes polling together try candidates in different orders, so they collide less. */
function shuffle<T>(items: T[]): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [items[i], items[j]] = [items[j] as T, items[i] as T];
  }
  return items;
}
