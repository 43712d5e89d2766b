/**
 * A real HTTPS webhook receiver on 127.0.0.1 for tests: a self-signed
 * certificate made at test time (its PEM written to a file for
 * WEBHOOK_CA_FILE), per-path behaviour (status, delay, hang, fail N times)
 * and a record of every raw body and header set it was sent.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generate } from 'selfsigned';

export interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  raw: Buffer;
  body: any;
  at: number;
}

export interface Reply {
  status: number;
  headers?: Record<string, string>;
  body?: string;
  /** Answer only after this many ms. */
  delayMs?: number;
  /** Never answer (the connection stays open until the client gives up). */
  hang?: boolean;
}

/** Decides the reply to the n-th request (1-based) on a path. */
export type Behaviour = (n: number, req: Received) => Reply;

export const ok: Behaviour = () => ({ status: 200, body: 'ok' });
export const status = (code: number, headers?: Record<string, string>): Behaviour => () => ({ status: code, headers });
export const hang: Behaviour = () => ({ status: 200, hang: true });
export const failTimes = (n: number, code = 500): Behaviour => (i) => (i <= n ? { status: code } : { status: 200 });

let certificate: Promise<{ cert: string; key: string; caFile: string }> | null = null;

/** One certificate per test process (RSA generation takes a moment). */
function testCertificate(): Promise<{ cert: string; key: string; caFile: string }> {
  certificate ??= (async () => {
    const pems = await generate([{ name: 'commonName', value: 'webhook-test-receiver' }], {
      keyType: 'ec',
      algorithm: 'sha256',
      notAfterDate: new Date(Date.now() + 7 * 24 * 3600 * 1000),
      extensions: [
        { name: 'basicConstraints', cA: true, critical: true },
        { name: 'keyUsage', digitalSignature: true, keyCertSign: true, critical: true },
        { name: 'extKeyUsage', serverAuth: true },
        {
          name: 'subjectAltName',
          altNames: [
            { type: 2, value: 'localhost' },
            { type: 2, value: '*.webhooks.test' },
            { type: 7, ip: '127.0.0.1' },
          ],
        },
      ],
    });
    const caFile = join(mkdtempSync(join(tmpdir(), 'webhook-ca-')), 'ca.pem');
    writeFileSync(caFile, pems.cert);
    return { cert: pems.cert, key: pems.private, caFile };
  })();
  return certificate;
}

/** The PEM file of the receivers' CA (for WEBHOOK_CA_FILE), available before any receiver listens. */
export async function receiverCaFile(): Promise<string> {
  return (await testCertificate()).caFile;
}

export class Receiver {
  private readonly behaviours = new Map<string, Behaviour>();
  private readonly log: Received[] = [];
  private readonly counts = new Map<string, number>();
  private waiters: (() => void)[] = [];
  /** Connections accepted (TCP) since the receiver started. */
  connections = 0;

  private constructor(
    private readonly server: https.Server,
    readonly port: number,
    readonly caFile: string,
  ) {}

  /** `port`: listen there (a receiver that comes up late on a URL already subscribed); default any free port. */
  static async start(opts: { port?: number } = {}): Promise<Receiver> {
    const { cert, key, caFile } = await testCertificate();
    let self: Receiver | null = null;
    const server = https.createServer({ cert, key }, (req, res) => self?.handle(req, res));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(opts.port ?? 0, '127.0.0.1', () => resolve());
    });
    self = new Receiver(server, (server.address() as AddressInfo).port, caFile);
    const receiver = self;
    server.on('connection', () => receiver.connections++);
    return self;
  }

  /** https://127.0.0.1:<port><path>, or the same port under another host name. */
  url(path: string, host = '127.0.0.1'): string {
    return `https://${host}:${this.port}${path}`;
  }

  on(path: string, behaviour: Behaviour): this {
    this.behaviours.set(path, behaviour);
    return this;
  }

  received(path?: string): Received[] {
    return path === undefined ? [...this.log] : this.log.filter((r) => r.path === path);
  }

  /** Resolves once `path` has received at least `count` requests. */
  async waitFor(path: string, count: number, timeoutMs = 20_000): Promise<Received[]> {
    const deadline = Date.now() + timeoutMs;
    while (this.received(path).length < count) {
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`receiver ${path}: expected ${count} requests, got ${this.received(path).length}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 250));
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    return this.received(path);
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = (req.url ?? '/').split('?')[0] as string;
      const raw = Buffer.concat(chunks);
      let body: any;
      try {
        body = JSON.parse(raw.toString('utf8'));
      } catch {
        body = raw.toString('utf8');
      }
      const entry: Received = { path, headers: req.headers, raw, body, at: Date.now() };
      this.log.push(entry);
      const n = (this.counts.get(path) ?? 0) + 1;
      this.counts.set(path, n);
      for (const wake of this.waiters.splice(0)) wake();
      const reply = (this.behaviours.get(path) ?? ok)(n, entry);
      if (reply.hang) return;
      const answer = (): void => {
        res.writeHead(reply.status, { 'content-type': 'text/plain', ...reply.headers });
        res.end(reply.body ?? '');
      };
      if (reply.delayMs) setTimeout(answer, reply.delayMs);
      else answer();
    });
  }
}
