/** The health feature as the rest of the API sees it (deps.ts builds its Kafka probe). */
export { KafkaProbe } from './kafka-probe.js';
