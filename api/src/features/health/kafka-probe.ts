import type { Admin, Kafka } from 'kafkajs';

/** Answers "can we talk to a broker right now?" without kafkajs's long retry loops. */
export class KafkaProbe {
  private admin: Admin | null = null;

  constructor(private readonly kafka: Kafka) {}

  async check(timeoutMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        (async () => {
          this.admin ??= this.kafka.admin({ retry: { retries: 0 } });
          await this.admin.connect();
          await this.admin.describeCluster();
        })(),
        new Promise((_, reject) => {
          timer = setTimeout(() => reject(new Error(`no answer from Kafka within ${timeoutMs} ms`)), timeoutMs);
        }),
      ]);
    } catch (err) {
      // Start from a fresh connection next time rather than a half-broken one.
      const admin = this.admin;
      this.admin = null;
      admin?.disconnect().catch(() => undefined);
      throw err;
    } finally {
      clearTimeout(timer);
    }
  }

  async close(): Promise<void> {
    await this.admin?.disconnect();
    this.admin = null;
  }
}
