/**
 * The head of the event log: each partition's end offset as Kafka reports it
 * (the high watermark, past every acknowledged event: an ingest is answered
 * only once the in-sync replicas have it). A read notes it when it starts, so
 * it can include every event acknowledged before, on whichever pod
 * (docs/decisions.md, "A read includes every event acknowledged before it").
 *
 * Never cached: an answer only covers acknowledgements made before its
 * request was sent. Concurrent readers share requests instead: one request is
 * in flight at a time, and a reader that comes while one is in flight waits
 * for the next, which is sent as soon as the current one is answered (so a
 * reader waits at most two round trips, and a busy process sends one request
 * per round trip, whatever its number of readers).
 */
import type { Admin, Kafka } from 'kafkajs';

export type Offsets = ReadonlyMap<number, bigint>;

export class LogHead {
  /** The request sent and not yet answered. */
  private current: Promise<Offsets> | null = null;
  /** The request readers that came while `current` was in flight wait for. */
  private queued: Promise<Offsets> | null = null;

  constructor(
    private readonly fetch: () => Promise<Offsets>,
    /** Lets go of the connection (at shutdown). */
    readonly close: () => Promise<void> = async () => undefined,
  ) {}

  /** Every partition's end offset, from a request sent after this call. */
  latest(): Promise<Offsets> {
    if (this.current === null) return this.send();
    this.queued ??= this.current.then(noop, noop).then(() => {
      this.queued = null;
      return this.send();
    });
    return this.queued;
  }

  private send(): Promise<Offsets> {
    const sent = this.fetch();
    this.current = sent;
    const settle = (): void => {
      if (this.current === sent) this.current = null;
    };
    sent.then(settle, settle);
    return sent;
  }
}

const noop = (): void => undefined;

/**
 * End offsets of `topic` through one long-lived admin client, each request
 * bounded by `timeoutMs` (a broker that does not answer fails the read with
 * 503 rather than hold it); after a failure the next request connects afresh.
 */
export class KafkaHeadSource {
  private admin: Admin | null = null;
  private connecting: Promise<Admin> | null = null;

  constructor(
    private readonly kafka: Kafka,
    private readonly topic: string,
    private readonly timeoutMs: number,
  ) {}

  async fetch(): Promise<Offsets> {
    let timer: NodeJS.Timeout | undefined;
    try {
      return await Promise.race([
        this.connect().then(async (admin) => new Map((await admin.fetchTopicOffsets(this.topic)).map((o) => [o.partition, BigInt(o.high)]))),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`no end offsets from Kafka within ${this.timeoutMs} ms`)), this.timeoutMs);
        }),
      ]);
    } catch (err) {
      void this.close();
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  async close(): Promise<void> {
    const admin = this.admin;
    this.admin = null;
    this.connecting = null;
    await admin?.disconnect().catch(() => undefined);
  }

  private connect(): Promise<Admin> {
    if (this.admin) return Promise.resolve(this.admin);
    this.connecting ??= (async () => {
      const admin = this.kafka.admin({ retry: { retries: 1, initialRetryTime: 50, maxRetryTime: 200 } });
      try {
        await admin.connect();
      } catch (err) {
        this.connecting = null;
        await admin.disconnect().catch(() => undefined);
        throw err;
      }
      this.admin = admin;
      this.connecting = null;
      return admin;
    })();
    return this.connecting;
  }
}
