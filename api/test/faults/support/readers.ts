/**
 * Readers for the soak: per account a cursor poller, a long-poller and two
 * SSE streams that resume from their last id whenever the server ends them,
 * spread over the API processes. Every answer's status is counted.
 */
import { call, type JsonResponse } from '../../support/api.js';
import type { TestAccount } from '../../support/accounts.js';
import { sleep } from './cluster.js';
import { openStream } from './streams.js';

/** Status counts per kind of request. */
export class Ops {
  readonly counts = new Map<string, Map<number, number>>();

  record(op: string, status: number): void {
    const byStatus = this.counts.get(op) ?? new Map<number, number>();
    byStatus.set(status, (byStatus.get(status) ?? 0) + 1);
    this.counts.set(op, byStatus);
  }

  /** "op status xN" for every answer not in `allowed` (default: 200 only). */
  unexpected(allowed: Record<string, number[]>): string[] {
    const out: string[] = [];
    for (const [op, byStatus] of this.counts) for (const [status, n] of byStatus) if (!(allowed[op] ?? [200]).includes(status)) out.push(`${op} ${status} x${n}`);
    return out;
  }

  summary(): Record<string, Record<string, number>> {
    return Object.fromEntries([...this.counts].map(([op, m]) => [op, Object.fromEntries([...m].map(([s, n]) => [String(s), n]))]));
  }
}

export interface StreamRecord {
  account: TestAccount;
  /** Every event id (cursor) received, over all of this reader's connections. */
  ids: string[];
}

export class Readers {
  readonly ops = new Ops();
  readonly streams: StreamRecord[] = [];
  private running = true;
  private readonly loops: Promise<void>[] = [];

  constructor(
    private readonly nextBase: () => string,
    accounts: TestAccount[],
  ) {
    for (const account of accounts) {
      this.loops.push(this.poll(account), this.longPoll(account));
      for (let k = 0; k < 2; k++) {
        const record = { account, ids: [] as string[] };
        this.streams.push(record);
        this.loops.push(this.stream(record));
      }
    }
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.loops);
  }

  private async poll(account: TestAccount): Promise<void> {
    let since: string | null = null;
    while (this.running) {
      const res: JsonResponse = await call(this.nextBase(), 'GET', `/api/v1/events?limit=100${since ? `&since=${encodeURIComponent(since)}` : ''}`, { headers: { authorization: `Bearer ${account.apiKey}` } });
      this.ops.record('poll', res.status);
      if (res.status === 200) since = res.body.cursor ?? since;
      await sleep(300);
    }
  }

  /** Loops the wait from its last cursor, as docs/spec.md's clients do. */
  private async longPoll(account: TestAccount): Promise<void> {
    let since: string | undefined;
    while (this.running) {
      const res: JsonResponse = await call(this.nextBase(), 'POST', '/api/v1/events/wait', { headers: { authorization: `Bearer ${account.apiKey}` }, body: { timeout_ms: 3000, ...(since ? { since } : {}) } });
      this.ops.record('long-poll', res.status);
      if (res.status === 200) since = res.body.event?.cursor ?? res.body.cursor ?? since;
      else await sleep(500);
    }
  }

  private async stream(record: StreamRecord): Promise<void> {
    while (this.running) {
      const last = record.ids.at(-1);
      const s = await openStream(this.nextBase(), record.account.apiKey, last ? `&since=${encodeURIComponent(last)}` : '');
      this.ops.record('stream', s.status);
      if (s.status !== 200) {
        await sleep(1000);
        continue;
      }
      const closer = setInterval(() => !this.running && s.close(), 200);
      await s.ended;
      clearInterval(closer);
      record.ids.push(...s.ids);
    }
  }
}
