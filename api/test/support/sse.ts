import { EventSource } from 'eventsource';

export interface ReceivedEvent {
  id: string;
  type: string;
  record: any;
}

/** A real EventSource client that records what it receives. */
export class StreamClient {
  readonly events: ReceivedEvent[] = [];
  readonly errors: { code?: number; message?: string }[] = [];
  opens = 0;
  private readonly es: EventSource;
  private waiters: (() => void)[] = [];

  /** The Last-Event-ID each reconnect sent (null: none, the stream restarts at the live end). */
  readonly reconnects: (string | null)[] = [];

  /** @param opts.beforeReconnect held before each reconnect's request (a test widens the reconnect gap with it) */
  constructor(url: string, opts: { lastEventId?: string; types?: readonly string[]; beforeReconnect?: () => Promise<void> } = {}) {
    this.es = new EventSource(url, {
      fetch: async (input, init) => {
        const headers: Record<string, string> = { ...(init?.headers as Record<string, string>) };
        if (this.opens > 0) {
          this.reconnects.push(headers['Last-Event-ID'] ?? null);
          await opts.beforeReconnect?.();
        }
        // Only for the first connection: EventSource sends its own Last-Event-ID on reconnects.
        if (opts.lastEventId && this.opens === 0 && !headers['Last-Event-ID']) headers['Last-Event-ID'] = opts.lastEventId;
        return fetch(input, { ...init, headers });
      },
    });
    this.es.addEventListener('open', () => {
      this.opens += 1;
      this.notify();
    });
    this.es.addEventListener('error', (e: any) => {
      this.errors.push({ code: e.code, message: e.message });
      this.notify();
    });
    for (const type of opts.types ?? ALL_TYPES) {
      this.es.addEventListener(type, (e: any) => {
        this.events.push({ id: e.lastEventId, type: e.type, record: JSON.parse(e.data) });
        this.notify();
      });
    }
  }

  get readyState(): number {
    return this.es.readyState;
  }

  /** Resolves once `check` holds; rejects after `timeoutMs`. */
  async until(check: (c: this) => boolean, timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!check(this)) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`stream condition not met within ${timeoutMs} ms (events: ${this.events.length}, errors: ${JSON.stringify(this.errors)})`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 200));
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  close(): void {
    this.es.close();
  }

  private notify(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }
}

const ALL_TYPES = ['call.started', 'call.ended', 'call.transcribed', 'call.completed', 'call.takeover', 'message.received', 'message.sent', 'webhook.ping'];
