/**
 * Steady ingest from a few concurrent producers, each looping one request at a
 * time; every request's outcome is kept, so a test can say which events were
 * acknowledged and what was answered when.
 */
import { PRODUCER_EVENT_TYPES } from '#shared/eventlog/types.js';
import { ingestRaw, sleep, type IngestOutcome } from './cluster.js';

export interface TimedOutcome extends IngestOutcome {
  startedAt: number;
  endedAt: number;
}

export interface IngestLoadOptions {
  /** Producers running at once. */
  concurrency: number;
  /** Events per request. */
  batch: number;
  /** Pause after each request (ms); after a refusal the pause is at least 200 ms. */
  pauseMs?: number;
  /** Types to cycle through: those producers may send, webhook.ping left out by default (it is for one subscription). */
  types?: readonly string[];
}

export class IngestLoad {
  readonly outcomes: TimedOutcome[] = [];
  /** Every acknowledged event id, with its account. */
  readonly acked = new Map<string, string>();
  private running = false;
  private workers: Promise<void>[] = [];
  private seq = 0;

  constructor(
    private readonly base: () => string,
    private readonly accounts: string[],
    private readonly opts: IngestLoadOptions,
  ) {}

  start(): void {
    this.running = true;
    this.workers = Array.from({ length: this.opts.concurrency }, (_, n) => this.work(n));
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.workers);
  }

  /** Acknowledged ids of one account. */
  ackedFor(accountId: string): string[] {
    return [...this.acked].filter(([, account]) => account === accountId).map(([id]) => id);
  }

  count(status: number, from = 0, to = Infinity): number {
    return this.outcomes.filter((o) => o.status === status && o.startedAt >= from && o.endedAt <= to).length;
  }

  private async work(worker: number): Promise<void> {
    const types = this.opts.types ?? PRODUCER_EVENT_TYPES.filter((t) => t !== 'webhook.ping');
    while (this.running) {
      const events = Array.from({ length: this.opts.batch }, () => {
        const seq = this.seq++;
        const account = this.accounts[seq % this.accounts.length] as string;
        return { account_id: account, type: types[seq % types.length] as string, data: { seq, worker } };
      });
      const startedAt = Date.now();
      const outcome = await ingestRaw(this.base(), events);
      this.outcomes.push({ ...outcome, startedAt, endedAt: Date.now() });
      outcome.ids.forEach((id, i) => this.acked.set(id, (events[i] as { account_id: string }).account_id));
      const pause = outcome.status === 202 ? (this.opts.pauseMs ?? 0) : Math.max(200, this.opts.pauseMs ?? 0);
      if (pause > 0) await sleep(pause);
    }
  }
}
