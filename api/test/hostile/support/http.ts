/** Request helpers for hostile tests: any bytes in, the raw answer out. */
import net from 'node:net';
import type { Answer } from './oracle.js';

export interface HostileRequest {
  method: string;
  /** Path and query, sent as given. */
  path: string;
  headers?: Record<string, string>;
  /** Sent exactly as given (a JSON text, or anything else). */
  body?: string | Buffer;
  /** Give up waiting after this long (the request is then abandoned, not failed). */
  timeoutMs?: number;
}

export interface HostileAnswer extends Answer {
  /** The parsed body when it is JSON, else undefined. */
  json: any;
}

/** fetch with a body sent verbatim; null when the answer did not come within timeoutMs. */
export async function send(base: string, req: HostileRequest): Promise<HostileAnswer | null> {
  const headers: Record<string, string> = { ...req.headers };
  if (req.body !== undefined && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) headers['content-type'] = 'application/json';
  const signal = AbortSignal.timeout(req.timeoutMs ?? 15_000);
  let res: Response;
  let text: string;
  try {
    res = await fetch(base + req.path, { method: req.method, headers, body: req.body, signal });
    if (res.status < 300 && (res.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
      // An open stream: the answer is its status and headers; reading on would wait for its end.
      await res.body?.cancel();
      text = '';
    } else {
      text = await res.text();
    }
  } catch (err) {
    if ((err as Error).name === 'TimeoutError') return null;
    throw err;
  }
  let json: any;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

/** Like `send`, but a missing answer is an error: for requests that must be answered. */
export async function answer(base: string, req: HostileRequest): Promise<HostileAnswer> {
  const res = await send(base, req);
  if (!res) throw new Error(`${req.method} ${req.path}: no answer within ${req.timeoutMs ?? 15_000} ms`);
  return res;
}

export const describeRequest = (req: HostileRequest): string => {
  const body = req.body === undefined ? '' : ` body=${(typeof req.body === 'string' ? req.body : `<${req.body.length} bytes>`).slice(0, 300)}`;
  const headers = req.headers && Object.keys(req.headers).length > 0 ? ` headers=${JSON.stringify(req.headers).slice(0, 300)}` : '';
  return `${req.method} ${req.path.slice(0, 300)}${headers}${body}`;
};

/**
 * Writes raw bytes on a fresh TCP connection and returns the answer, parsed
 * just enough to check (status, headers, body). For what fetch refuses to
 * send: bytes above 0x7F in header values, bare CR/LF, broken framing.
 */
export function rawExchange(base: string, bytes: Buffer | string, timeoutMs = 10_000): Promise<Answer | null> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: url.hostname, port: Number(url.port) });
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      resolve(parseRaw(Buffer.concat(chunks)));
    }, timeoutMs);
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', (err: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      // A server that resets a garbage connection has answered it well enough.
      if (err.code === 'ECONNRESET' || err.code === 'EPIPE') resolve(parseRaw(Buffer.concat(chunks)));
      else reject(err);
    });
    socket.on('end', () => {
      clearTimeout(timer);
      resolve(parseRaw(Buffer.concat(chunks)));
    });
    socket.write(bytes);
  });
}

function parseRaw(buf: Buffer): Answer | null {
  const text = buf.toString('latin1');
  const headEnd = text.indexOf('\r\n\r\n');
  if (!text.startsWith('HTTP/1.1 ') || headEnd < 0) return null;
  const [statusLine, ...lines] = text.slice(0, headEnd).split('\r\n');
  const headers = new Headers();
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon > 0) headers.append(line.slice(0, colon).trim(), line.slice(colon + 1).trim());
  }
  let body = buf.subarray(Buffer.byteLength(text.slice(0, headEnd + 4), 'latin1'));
  if (headers.get('transfer-encoding') === 'chunked') body = dechunk(body);
  return { status: Number(statusLine!.split(' ')[1]), headers, text: body.toString('utf8') };
}

function dechunk(buf: Buffer): Buffer {
  const out: Buffer[] = [];
  let at = 0;
  for (;;) {
    const lineEnd = buf.indexOf('\r\n', at);
    if (lineEnd < 0) break;
    const size = parseInt(buf.subarray(at, lineEnd).toString('latin1'), 16);
    if (!(size > 0)) break;
    out.push(buf.subarray(lineEnd + 2, lineEnd + 2 + size));
    at = lineEnd + 2 + size + 2;
  }
  return Buffer.concat(out);
}
