// Kafka for the bench: topic housekeeping (kafkajs admin) and Kafka's own
// measuring tools from the kafka-tools jar the infra already installed
// (ProducerPerformance, EndToEndLatency), run against the same broker.
import { execFile } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Kafka, logLevel } from 'kafkajs';
import { infraCache, root, scratchDir } from './paths.mjs';

function infraSetting(name) {
  const m = new RegExp(`^${name}=(.+)$`, 'm').exec(readFileSync(join(root, 'scripts', 'infra', 'lib.sh'), 'utf8'));
  return m ? m[1].trim() : null;
}

export const KAFKA_VERSION = infraSetting('KAFKA_VERSION');

function kafkaLib() {
  const lib = join(infraCache, `kafka-${KAFKA_VERSION}`, 'lib');
  if (!existsSync(join(lib, `kafka-tools-${KAFKA_VERSION}.jar`))) {
    throw new Error(`kafka-tools jar not found in ${lib}: run scripts/infra/up.sh (it installs Kafka with its tools)`);
  }
  return lib;
}

export function kafkaAdmin(brokers) {
  return new Kafka({ clientId: 'bench', brokers: brokers.split(','), logLevel: logLevel.NOTHING }).admin();
}

export async function createTopic(brokers, topic, partitions) {
  const admin = kafkaAdmin(brokers);
  await admin.connect();
  try {
    await admin.createTopics({ waitForLeaders: true, topics: [{ topic, numPartitions: partitions }] });
  } finally {
    await admin.disconnect();
  }
}

/** Deletes the run's topics and consumer groups (everything whose name starts with `prefix`). */
export async function dropKafka(brokers, prefix) {
  const admin = kafkaAdmin(brokers);
  await admin.connect();
  try {
    const topics = (await admin.listTopics()).filter((t) => t.startsWith(prefix));
    const { groups } = await admin.listGroups();
    const ours = groups.map((g) => g.groupId).filter((g) => g.startsWith(prefix));
    if (ours.length) await admin.deleteGroups(ours).catch(() => undefined);
    if (topics.length) await admin.deleteTopics({ topics, timeout: 30_000 });
    return { topics: topics.length, groups: ours.length };
  } finally {
    await admin.disconnect();
  }
}

function java(mainClass, args, timeoutMs) {
  const log4j = join(scratchDir, 'tools-log4j.properties');
  writeFileSync(log4j, 'log4j.rootLogger=WARN, stderr\nlog4j.appender.stderr=org.apache.log4j.ConsoleAppender\nlog4j.appender.stderr.Target=System.err\nlog4j.appender.stderr.layout=org.apache.log4j.PatternLayout\nlog4j.appender.stderr.layout.ConversionPattern=%p %m%n\n');
  return new Promise((resolve, reject) => {
    execFile(
      'java',
      ['-Xmx512m', `-Dlog4j.configuration=file:${log4j}`, '-cp', join(kafkaLib(), '*'), mainClass, ...args],
      { timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 },
      (err, stdout, stderr) => (err ? reject(new Error(`${mainClass} failed: ${err.message}\n${stderr}`)) : resolve(stdout)),
    );
  });
}

/**
 * org.apache.kafka.tools.ProducerPerformance: records/s the Java producer gets
 * from this broker with acks=all (idempotent, the client's default) and
 * records of `recordSize` bytes. The topic must exist (auto-creation is off).
 */
export async function producerPerformance(brokers, topic, { records, recordSize }) {
  const out = await java(
    'org.apache.kafka.tools.ProducerPerformance',
    ['--topic', topic, '--num-records', String(records), '--record-size', String(recordSize), '--throughput', '-1', '--producer-props', `bootstrap.servers=${brokers}`, 'acks=all'],
    180_000,
  );
  const last = out.trim().split('\n').at(-1);
  const m = /([\d.]+) records\/sec.*?([\d.]+) ms avg latency.*?(\d+) ms 50th.*?(\d+) ms 99th/.exec(last ?? '');
  if (!m) throw new Error(`cannot read ProducerPerformance output: ${last}`);
  return { recordsPerSec: Number(m[1]), avgLatencyMs: Number(m[2]), p50: Number(m[3]), p99: Number(m[4]) };
}

/**
 * org.apache.kafka.tools.EndToEndLatency: produce one record (acks=all), consume
 * it, repeat; the broker's own produce-to-consume latency, in whole ms.
 */
export async function endToEndLatency(brokers, topic, { messages, size }) {
  const out = await java('org.apache.kafka.tools.EndToEndLatency', [brokers, topic, String(messages), 'all', String(size)], 180_000);
  const m = /50th = ([\d.]+), 99th = ([\d.]+)/.exec(out);
  const avg = /Avg latency: ([\d.]+)/.exec(out);
  if (!m) throw new Error(`cannot read EndToEndLatency output: ${out.slice(-300)}`);
  return { p50: Number(m[1]), p99: Number(m[2]), avg: avg ? Number(avg[1]) : null };
}
