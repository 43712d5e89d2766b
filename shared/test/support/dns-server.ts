/**
 * A real DNS server on loopback UDP for tests (node:dgram): parses each
 * query, answers A records for the names it was given, NODATA for other
 * types of a known name, NXDOMAIN for unknown names. A "hostile" name is held:
 * its queries get an answer only after `holdMs` (30 s by default) or when
 * the test calls release(), like a slow or malicious authoritative server.
 * Point a resolver at it with DNS_SERVERS=127.0.0.1:<port>.
 */
import dgram from 'node:dgram';
import type { AddressInfo } from 'node:net';

export interface Query {
  name: string;
  type: number;
  at: number;
}

interface Zone {
  addresses: string[];
  ttl: number;
}

const TYPE_A = 1;
const RCODE_NXDOMAIN = 3;

export class DnsServer {
  readonly queries: Query[] = [];
  private readonly zones = new Map<string, Zone>();
  private readonly hostile = new Map<string, Zone>();
  private readonly held = new Set<{ timer: NodeJS.Timeout; answer: () => void }>();

  private constructor(
    private readonly socket: dgram.Socket,
    readonly port: number,
    private readonly holdMs: number,
  ) {}

  /** `port`: listen there (53, for a measurement in a private network namespace); default any free port. */
  static async start(opts: { holdMs?: number; port?: number } = {}): Promise<DnsServer> {
    const socket = dgram.createSocket('udp4');
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.bind(opts.port ?? 0, '127.0.0.1', () => resolve());
    });
    const server = new DnsServer(socket, (socket.address() as AddressInfo).port, opts.holdMs ?? 30_000);
    socket.on('message', (msg, rinfo) => server.handle(msg, rinfo));
    return server;
  }

  /** DNS_SERVERS for a config pointed at this server. */
  get address(): string {
    return `127.0.0.1:${this.port}`;
  }

  /** The name answers these IPv4 addresses at once. */
  set(name: string, addresses: string[], ttl = 60): this {
    this.zones.set(name.toLowerCase(), { addresses, ttl });
    return this;
  }

  /** The name answers these addresses only after holdMs, or on release(). */
  slow(name: string, addresses: string[], ttl = 60): this {
    this.hostile.set(name.toLowerCase(), { addresses, ttl });
    return this;
  }

  /** Names asked about (any type), each once, in the order first asked. */
  names(): string[] {
    return [...new Set(this.queries.map((q) => q.name))];
  }

  /** Queries being held right now. */
  get holding(): number {
    return this.held.size;
  }

  /** Answers every held query now. */
  release(): void {
    for (const h of [...this.held]) {
      clearTimeout(h.timer);
      h.answer();
    }
  }

  async close(): Promise<void> {
    for (const h of this.held) clearTimeout(h.timer);
    this.held.clear();
    await new Promise<void>((resolve) => this.socket.close(() => resolve()));
  }

  private handle(msg: Buffer, rinfo: dgram.RemoteInfo): void {
    const question = parseQuestion(msg);
    if (!question) return;
    const name = question.name.toLowerCase();
    this.queries.push({ name, type: question.type, at: Date.now() });
    const send = (zone: Zone | undefined): void => {
      const reply = buildReply(msg, question.end, zone ? (question.type === TYPE_A ? zone.addresses : []) : null, zone?.ttl ?? 0);
      this.socket.send(reply, rinfo.port, rinfo.address);
    };
    const slow = this.hostile.get(name);
    if (!slow) return send(this.zones.get(name));
    const entry = {
      answer: (): void => {
        this.held.delete(entry);
        send(slow);
      },
      timer: setTimeout(() => entry.answer(), this.holdMs),
    };
    this.held.add(entry);
  }
}

/** The first question: its name, type and where it ends in the message. */
function parseQuestion(msg: Buffer): { name: string; type: number; end: number } | null {
  if (msg.length < 12 || msg.readUInt16BE(4) < 1) return null;
  const labels: string[] = [];
  let i = 12;
  while (i < msg.length) {
    const len = msg[i]!;
    if (len === 0) break;
    if (len > 63 || i + 1 + len > msg.length) return null;
    labels.push(msg.toString('latin1', i + 1, i + 1 + len));
    i += 1 + len;
  }
  if (i + 5 > msg.length) return null;
  return { name: labels.join('.'), type: msg.readUInt16BE(i + 1), end: i + 5 };
}

/** Header + the question copied + one A record per address (NXDOMAIN when addresses is null). */
function buildReply(query: Buffer, questionEnd: number, addresses: string[] | null, ttl: number): Buffer {
  const header = Buffer.alloc(12);
  query.copy(header, 0, 0, 2); // id
  const rd = query[2]! & 0x01;
  header[2] = 0x84 | rd; // QR, AA, RD as asked
  header[3] = 0x80 | (addresses === null ? RCODE_NXDOMAIN : 0); // RA, rcode
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(addresses?.length ?? 0, 6);
  const answers = (addresses ?? []).map((ip) => {
    const rr = Buffer.alloc(16);
    rr.writeUInt16BE(0xc00c, 0); // name: pointer to the question
    rr.writeUInt16BE(TYPE_A, 2);
    rr.writeUInt16BE(1, 4); // IN
    rr.writeUInt32BE(ttl, 6);
    rr.writeUInt16BE(4, 10);
    ip.split('.').forEach((octet, k) => (rr[12 + k] = Number(octet)));
    return rr;
  });
  return Buffer.concat([header, query.subarray(12, questionEnd), ...answers]);
}
