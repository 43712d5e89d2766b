/**
 * Coalesces concurrent submissions into fewer, larger sends. kafkajs sends
 * each `producer.send()` on its own, and the idempotent producer allows one
 * request in flight, so without this every ingest request would wait its turn
 * for a full round trip. Items are flushed in submission order, at most one
 * send at a time, when `lingerMs` has passed since the first waiting item,
 * `maxItems` / `maxBytes` are reached, or the previous send ends; items of one submission keep their order
 * but may span sends (a single send must stay under the broker's batch size).
 */
interface BatcherOptions<T, R> {
  send(items: T[]): Promise<R[]>;
  sizeOf(item: T): number;
  lingerMs: number;
  maxItems: number;
  maxBytes: number;
}

interface Pending<T, R> {
  item: T;
  size: number;
  settle: { resolve(r: R): void; reject(e: unknown): void };
}

/** A submission not sent within its `timeoutMs` (see Batcher.submit). */
export class BatchTimeoutError extends Error {
  constructor(readonly timeoutMs: number) {
    super(`not sent within ${timeoutMs} ms`);
    this.name = 'BatchTimeoutError';
  }
}

export class Batcher<T, R> {
  private queue: Pending<T, R>[] = [];
  private queuedBytes = 0;
  private timer: NodeJS.Timeout | null = null;
  private inFlight: Promise<void> | null = null;

  constructor(private readonly opts: BatcherOptions<T, R>) {}

  /**
   * Resolves with one result per item, in order, once every item is sent.
   * When `signal` aborts first, the items not yet handed to a send are
   * withdrawn (never sent) and the promise rejects with the abort reason;
   * items already in a send cannot be recalled and may still be written.
   * `timeoutMs` does the same after that long, rejecting with a
   * BatchTimeoutError: one plain timer per submission, far cheaper per
   * request than an AbortSignal.timeout (an EventTarget and a tracked timer).
   */
  submit(items: T[], signal?: AbortSignal, timeoutMs?: number): Promise<R[]> {
    if (signal?.aborted) return Promise.reject(signal.reason as Error);
    const entries: Pending<T, R>[] = [];
    const promises = items.map(
      (item) =>
        new Promise<R>((resolve, reject) => {
          const size = this.opts.sizeOf(item);
          const entry = { item, size, settle: { resolve, reject } };
          entries.push(entry);
          this.queue.push(entry);
          this.queuedBytes += size;
        }),
    );
    this.schedule();
    const all = promises.length === 1 ? (promises[0] as Promise<R>).then((r) => [r]) : Promise.all(promises);
    if (!signal && timeoutMs === undefined) return all;
    return new Promise<R[]>((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined;
      const giveUp = (reason: Error): void => {
        if (timer) clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        this.withdraw(entries);
        reject(reason);
      };
      const onAbort = (): void => giveUp(signal?.reason as Error);
      signal?.addEventListener('abort', onAbort, { once: true });
      if (timeoutMs !== undefined) timer = setTimeout(() => giveUp(new BatchTimeoutError(timeoutMs)), timeoutMs);
      all.then(
        (results) => {
          if (timer) clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          resolve(results);
        },
        (err: unknown) => {
          if (timer) clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          reject(err as Error);
        },
      );
    });
  }

  get pending(): number {
    return this.queue.length;
  }

  /** Sends everything queued now and waits until it is sent. */
  async flush(): Promise<void> {
    this.clearTimer();
    while (this.queue.length > 0 || this.inFlight) {
      if (this.inFlight) await this.inFlight;
      else this.startSend();
    }
  }

  /** Takes the entries still queued out of the queue; they are never sent and never settle. */
  private withdraw(entries: Pending<T, R>[]): void {
    const gone = new Set(entries);
    this.queue = this.queue.filter((p) => {
      if (!gone.has(p)) return true;
      this.queuedBytes -= p.size;
      return false;
    });
  }

  private schedule(): void {
    if (this.inFlight) return; // the running send schedules the next one when it ends
    if (this.queue.length >= this.opts.maxItems || this.queuedBytes >= this.opts.maxBytes || this.opts.lingerMs <= 0) {
      this.clearTimer();
      this.startSend();
      return;
    }
    this.timer ??= setTimeout(() => {
      this.timer = null;
      if (!this.inFlight) this.startSend();
    }, this.opts.lingerMs);
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  private takeBatch(): Pending<T, R>[] {
    let count = 0;
    let bytes = 0;
    while (count < this.queue.length && count < this.opts.maxItems) {
      const next = this.queue[count] as Pending<T, R>;
      if (count > 0 && bytes + next.size > this.opts.maxBytes) break;
      bytes += next.size;
      count += 1;
    }
    this.queuedBytes -= bytes;
    return this.queue.splice(0, count);
  }

  private startSend(): void {
    const batch = this.takeBatch();
    if (batch.length === 0) return;
    this.inFlight = this.opts
      .send(batch.map((p) => p.item))
      .then(
        (results) => {
          if (results.length !== batch.length) throw new Error(`send returned ${results.length} results for ${batch.length} items`);
          batch.forEach((p, i) => p.settle.resolve(results[i] as R));
        },
        (err: unknown) => batch.forEach((p) => p.settle.reject(err)),
      )
      .catch((err: unknown) => batch.forEach((p) => p.settle.reject(err)))
      .finally(() => {
        this.inFlight = null;
        // Whatever queued up meanwhile has waited a whole send already: no linger.
        if (this.queue.length > 0) this.startSend();
      });
  }
}
