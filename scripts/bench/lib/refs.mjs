// Reference measurements shared by several scenarios of one bench run.
import { envelopeBytes } from './events.mjs';
import { createTopic, endToEndLatency } from './kafka.mjs';

/**
 * Kafka's own produce-to-consume latency on this broker (EndToEndLatency,
 * acks=all, the bench's record size): the floor under every live path.
 */
export async function kafkaEndToEnd(ctx) {
  if (!ctx.shared.e2e) {
    const topic = ctx.topic('e2e-latency');
    await createTopic(ctx.services.KAFKA_BROKERS, topic, 1);
    ctx.shared.e2e = await endToEndLatency(ctx.services.KAFKA_BROKERS, topic, { messages: ctx.quick ? 500 : 1500, size: envelopeBytes('usr_000000000000000000000000') });
    ctx.log(`Kafka EndToEndLatency: p50 ${ctx.shared.e2e.p50} ms, p99 ${ctx.shared.e2e.p99} ms`);
  }
  return ctx.shared.e2e;
}
