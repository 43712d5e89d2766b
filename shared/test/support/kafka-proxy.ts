/**
 * A TCP proxy in front of the test broker that can lose Produce replies: the
 * broker receives and appends every batch, the client never hears back (a
 * broker frozen between append and reply, or a reply lost on the network).
 * Give a client `socketFactory` and every connection it opens (bootstrap and
 * the advertised leader alike) goes through the proxy, whatever address the
 * broker advertises; the test broker is a single node, so every connection
 * is forwarded to it.
 *
 * Kafka frames: a request is int32 size, int16 api key, int16 version, int32
 * correlation id; a response is int32 size, int32 correlation id.
 */
import net from 'node:net';
import type { AddressInfo } from 'node:net';

const PRODUCE = 0;

export class KafkaReplyDropper {
  /** While true, replies to Produce requests are swallowed. */
  dropProduceReplies = false;
  /** When a number: that many more Produce replies pass, then dropping starts (dropProduceReplies turns true). */
  passThenDrop: number | null = null;
  /** Produce replies swallowed so far. */
  dropped = 0;
  /** Produce requests forwarded so far. */
  produceRequests = 0;
  private readonly server: net.Server;
  private readonly sockets = new Set<net.Socket>();

  private constructor(private readonly target: { host: string; port: number }) {
    this.server = net.createServer((client) => this.pipe(client));
  }

  /** `broker` is `host:port` of the single test broker (KAFKA_BROKERS). */
  static async start(broker: string): Promise<KafkaReplyDropper> {
    const [host, port] = broker.split(',')[0]!.split(':') as [string, string];
    const proxy = new KafkaReplyDropper({ host, port: Number(port) });
    await new Promise<void>((resolve) => proxy.server.listen(0, '127.0.0.1', resolve));
    return proxy;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** For `new Kafka({ socketFactory })`: every broker address leads to the proxy. */
  readonly socketFactory = ({ onConnect }: { onConnect: () => void }): net.Socket => {
    const socket = net.connect({ host: '127.0.0.1', port: this.port }, onConnect);
    socket.setKeepAlive(true, 60_000);
    return socket;
  };

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private pipe(client: net.Socket): void {
    const broker = net.connect(this.target);
    this.sockets.add(client);
    this.sockets.add(broker);
    const produceIds = new Set<number>();
    const end = (): void => {
      client.destroy();
      broker.destroy();
      this.sockets.delete(client);
      this.sockets.delete(broker);
    };
    client.on('error', end).on('close', end);
    broker.on('error', end).on('close', end);
    frames(client, (frame) => {
      if (frame.readInt16BE(4) === PRODUCE) {
        produceIds.add(frame.readInt32BE(8));
        this.produceRequests += 1;
      }
      broker.write(frame);
    });
    frames(broker, (frame) => {
      const correlationId = frame.readInt32BE(4);
      if (produceIds.delete(correlationId)) {
        if (this.passThenDrop !== null && !this.dropProduceReplies) {
          if (this.passThenDrop === 0) this.dropProduceReplies = true;
          else this.passThenDrop -= 1;
        }
        if (this.dropProduceReplies) {
          this.dropped += 1;
          return;
        }
      }
      client.write(frame);
    });
  }
}

/** Calls `onFrame` with each whole length-prefixed frame read from `socket`. */
function frames(socket: net.Socket, onFrame: (frame: Buffer) => void): void {
  let buffered: Buffer = Buffer.alloc(0);
  socket.on('data', (chunk: Buffer) => {
    buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk]);
    while (buffered.length >= 4) {
      const size = buffered.readInt32BE(0);
      if (buffered.length < 4 + size) break;
      onFrame(buffered.subarray(0, 4 + size));
      buffered = buffered.subarray(4 + size);
    }
  });
}
