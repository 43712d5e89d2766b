/**
 * Reads a topic's id (the UUID Kafka gives each topic when it is created, since
 * Kafka 2.8). kafkajs speaks Metadata up to v6, which has no topic ids, so this
 * sends one Metadata v10 request itself over a plain connection (the service
 * connects to Kafka without TLS or SASL). A deleted and recreated topic keeps
 * its name but gets a new id: that is how a process tells that the offsets it
 * recorded belong to a log that no longer exists.
 */
import net from 'node:net';

const METADATA = 3;
const VERSION = 10;

/** The topic's id as 32 hex digits; throws when the broker does not know the topic or cannot answer. */
export async function fetchTopicId(brokers: string[], topic: string, clientId = 'topic-id', timeoutMs = 10_000): Promise<string> {
  let lastErr: unknown = new Error('no broker');
  for (const broker of brokers) {
    const [host, port] = broker.split(':') as [string, string];
    try {
      return parseTopicId(await roundTrip(host, Number(port), metadataRequest(topic, clientId), timeoutMs), topic);
    } catch (err) {
      lastErr = err;
    }
  }
  throw lastErr;
}

function metadataRequest(topic: string, clientId: string): Buffer {
  const name = Buffer.from(topic, 'utf8');
  const client = Buffer.from(clientId, 'utf8');
  const parts: Buffer[] = [];
  const header = Buffer.alloc(8);
  header.writeInt16BE(METADATA, 0);
  header.writeInt16BE(VERSION, 2);
  header.writeInt32BE(1, 4); // correlation id
  parts.push(header, int16(client.length), client, uvarint(0)); // client id (legacy string), no tagged fields
  // topics: compact array of one { topic_id: zero uuid, name: compact string, tagged fields }
  parts.push(uvarint(2), Buffer.alloc(16), uvarint(name.length + 1), name, uvarint(0));
  // allow_auto_topic_creation, include_cluster_authorized_operations, include_topic_authorized_operations, tagged fields
  parts.push(Buffer.from([0, 0, 0]), uvarint(0));
  const body = Buffer.concat(parts);
  return Buffer.concat([int32(body.length), body]);
}

/** Response v10: header v1, throttle, brokers, cluster id, controller id, then the topics. */
function parseTopicId(frame: Buffer, topic: string): string {
  const r = new Reader(frame);
  r.int32(); // correlation id
  r.skipTagged();
  r.int32(); // throttle_time_ms
  const brokers = r.uvarint() - 1;
  for (let i = 0; i < brokers; i++) {
    r.int32(); // node id
    r.compactString(); // host
    r.int32(); // port
    r.compactString(); // rack
    r.skipTagged();
  }
  r.compactString(); // cluster id
  r.int32(); // controller id
  const topics = r.uvarint() - 1;
  for (let i = 0; i < topics; i++) {
    const error = r.int16();
    const name = r.compactString();
    const id = r.bytes(16).toString('hex');
    if (name === topic) {
      if (error !== 0) throw new Error(`Kafka answered error ${error} for topic ${topic}'s metadata`);
      if (/^0+$/.test(id)) throw new Error(`Kafka gave no id for topic ${topic} (a broker before 2.8?)`);
      return id;
    }
    break; // one topic asked for: another name means no answer for ours
  }
  throw new Error(`Kafka's metadata did not describe topic ${topic}`);
}

function roundTrip(host: string, port: number, request: Buffer, timeoutMs: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host, port });
    let buffered = Buffer.alloc(0);
    const done = (err: Error | null, frame?: Buffer): void => {
      socket.destroy();
      clearTimeout(timer);
      if (err) reject(err);
      else resolve(frame as Buffer);
    };
    const timer = setTimeout(() => done(new Error(`no metadata answer from ${host}:${port} within ${timeoutMs} ms`)), timeoutMs);
    socket.on('connect', () => socket.write(request));
    socket.on('error', (err) => done(err));
    socket.on('close', () => done(new Error(`${host}:${port} closed the connection before answering`)));
    socket.on('data', (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      if (buffered.length >= 4 && buffered.length >= 4 + buffered.readInt32BE(0)) done(null, buffered.subarray(4, 4 + buffered.readInt32BE(0)));
    });
  });
}

class Reader {
  private at = 0;
  constructor(private readonly buf: Buffer) {}
  int16(): number {
    const v = this.buf.readInt16BE(this.at);
    this.at += 2;
    return v;
  }
  int32(): number {
    const v = this.buf.readInt32BE(this.at);
    this.at += 4;
    return v;
  }
  bytes(n: number): Buffer {
    if (this.at + n > this.buf.length) throw new Error('metadata answer cut short');
    const v = this.buf.subarray(this.at, this.at + n);
    this.at += n;
    return v;
  }
  uvarint(): number {
    let value = 0;
    for (let shift = 0; ; shift += 7) {
      const byte = this.buf.readUInt8(this.at++);
      value += (byte & 0x7f) * 2 ** shift;
      if ((byte & 0x80) === 0) return value;
    }
  }
  /** A compact (nullable) string: length + 1 as a varint, 0 for null. */
  compactString(): string | null {
    const n = this.uvarint();
    return n === 0 ? null : this.bytes(n - 1).toString('utf8');
  }
  skipTagged(): void {
    const fields = this.uvarint();
    for (let i = 0; i < fields; i++) {
      this.uvarint(); // tag
      this.bytes(this.uvarint());
    }
  }
}

function int16(n: number): Buffer {
  const b = Buffer.alloc(2);
  b.writeInt16BE(n);
  return b;
}

function int32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeInt32BE(n);
  return b;
}

function uvarint(n: number): Buffer {
  const out: number[] = [];
  let v = n;
  while (v >= 0x80) {
    out.push((v & 0x7f) | 0x80);
    v >>>= 7;
  }
  out.push(v);
  return Buffer.from(out);
}
