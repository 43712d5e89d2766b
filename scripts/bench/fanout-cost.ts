/**
 * What one process's fan-out costs, alone: a FanOut (api/src/live/fanout.ts)
 * with the default tail window over a fresh 12-partition topic of the local
 * Kafka, no waiters, while a child produces `--rate` events/s in sends of
 * `--per-send` events (round-robin over 500 accounts, 305-byte envelopes).
 * Prints the process's cores (all threads, user + system) and CPU per event;
 * --dormant-ms lets the fan-out go dormant first (it then fetches nothing).
 * No MongoDB, no HTTP, no materializer: only the consumer and the dispatch.
 *
 *   node --import tsx scripts/bench/fanout-cost.ts --rate 1000 --per-send 10 [--seconds 10] [--dormant-ms 0]
 *   node --cpu-prof --import tsx scripts/bench/fanout-cost.ts ...   (a CPU profile of the same)
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { Kafka, logLevel } from 'kafkajs';
import { pino } from 'pino';
import { FanOut } from '../../api/src/live/fanout.js';
import { TailWindow } from '../../api/src/live/tail-window.js';
import { WaiterRegistry } from '../../api/src/live/waiters.js';

const { values } = parseArgs({ options: { rate: { type: 'string', default: '1000' }, 'per-send': { type: 'string', default: '10' }, seconds: { type: 'string', default: '10' }, 'dormant-ms': { type: 'string', default: '0' }, produce: { type: 'string' } } });

if (values.produce) await produce(values.produce);
else await measure();

async function measure(): Promise<void> {
  // scripts/infra (plain JS): starts or reuses the local Kafka and FerretDB.
  const infra = '../infra/services.mjs';
  const { ensureServices } = (await import(infra)) as { ensureServices: () => Promise<{ KAFKA_BROKERS: string }> };
  const { KAFKA_BROKERS } = await ensureServices();
  const topic = `bench-fanout-cost-${process.pid}`;
  const kafka = new Kafka({ clientId: 'fanout-cost', brokers: KAFKA_BROKERS.split(','), logLevel: logLevel.NOTHING });
  const admin = kafka.admin();
  await admin.connect();
  await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: 12 }] });
  const dormantAfterMs = Number(values['dormant-ms']);
  const fanout = new FanOut({
    kafka,
    topic,
    groupPrefix: 'bench-fanout-cost',
    instanceId: String(process.pid),
    registry: new WaiterRegistry(),
    log: pino({ level: 'warn' }),
    history: { waitForWatermark: async () => true, readPartition: async () => [] },
    tail: new TailWindow({ events: 10_000, bytes: 2 * 1024 * 1024 }),
    dormantAfterMs,
  });
  try {
    await fanout.start();
    await new Promise((resolve) => setTimeout(resolve, 3000 + dormantAfterMs));
    const seconds = Number(values.seconds);
    const child = fork(fileURLToPath(import.meta.url), ['--produce', topic, '--rate', values.rate!, '--per-send', values['per-send']!, '--seconds', String(seconds)], { env: { ...process.env, KAFKA_BROKERS }, execArgv: ['--import', 'tsx'] });
    await new Promise((resolve) => child.once('message', resolve));
    const position = (): bigint => fanout.partitions().reduce((sum, p) => sum + fanout.position(p), 0n);
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const p0 = position();
    await new Promise((resolve) => child.once('exit', resolve));
    await new Promise((resolve) => setTimeout(resolve, 500));
    const cpu = process.cpuUsage(cpu0);
    const elapsed = (performance.now() - t0) / 1000;
    const events = Number(position() - p0);
    const micros = cpu.user + cpu.system;
    console.log(
      `fan-out alone, ${values.rate} ev/s in sends of ${values['per-send']}${dormantAfterMs > 0 ? `, dormant: ${fanout.dormant}` : ''}: ` +
        `${(micros / 1e6 / elapsed).toFixed(3)} cores over ${elapsed.toFixed(1)} s; ${events} events dispatched` +
        (events > 0 ? `; ${(micros / events).toFixed(1)} us of CPU per event (the idle floor included)` : ''),
    );
  } finally {
    await fanout.stop();
    await admin.deleteTopics({ topics: [topic] }).catch(() => undefined);
    await admin.disconnect();
  }
}

async function produce(topic: string): Promise<void> {
  const kafka = new Kafka({ clientId: 'fanout-cost-producer', brokers: process.env.KAFKA_BROKERS!.split(','), logLevel: logLevel.NOTHING });
  const producer = kafka.producer({ idempotent: true });
  await producer.connect();
  process.send?.('ready');
  const rate = Number(values.rate);
  const perSend = Number(values['per-send']);
  const t0 = Date.now();
  let sent = 0;
  while (Date.now() - t0 < Number(values.seconds) * 1000) {
    const due = Math.floor(((Date.now() - t0) / 1000) * rate) - sent;
    if (due < perSend) {
      await new Promise((resolve) => setTimeout(resolve, 2));
      continue;
    }
    const messages = Array.from({ length: perSend }, (_, i) => {
      const seq = sent + i;
      const account = `acc_${String(seq % 500).padStart(20, '0')}`;
      const envelope = { id: `evt_${seq.toString(16).padStart(24, '0')}`, account_id: account, type: 'message.received', created_at: new Date().toISOString(), data: { t: Date.now(), seq, from: '+14155550123', to: '+14155550199', channel: 'sms', text: 'Running about ten minutes late, see you at the usual place.' } };
      return { key: account, value: JSON.stringify(envelope) };
    });
    sent += perSend;
    await producer.send({ topic, acks: -1, messages });
  }
  await producer.disconnect();
  process.exit(0);
}
