/**
 * Server-sent event streams held open by plain fetch (no EventSource: the
 * tests decide when to reconnect), counting the events that arrive.
 */
import { call } from '../../support/api.js';

export interface OpenStream {
  status: number;
  /** Event ids received so far (the `id:` of each event; a resume point is not an event). */
  ids: string[];
  /** The last `id:` seen, event or resume point: where EventSource would reconnect from. */
  lastId: string | null;
  /** Settles when the server ends the stream or the connection drops. */
  ended: Promise<void>;
  close(): void;
}

/** Mints a stream token with the API key, then opens the stream; a refusal (429, 503) comes back as its status. */
export async function openStream(base: string, apiKey: string, query = ''): Promise<OpenStream> {
  const minted = await call(base, 'POST', '/api/v1/events/stream-token', { headers: { authorization: `Bearer ${apiKey}` } });
  if (minted.status !== 201) return { status: minted.status, ids: [], lastId: null, ended: Promise.resolve(), close: () => undefined };
  const abort = new AbortController();
  let res: Response;
  try {
    res = await fetch(`${base}/api/v1/events/stream?token=${encodeURIComponent(minted.body.token)}${query}`, { signal: abort.signal });
  } catch {
    return { status: 0, ids: [], lastId: null, ended: Promise.resolve(), close: () => undefined };
  }
  if (res.status !== 200 || !res.body) {
    await res.arrayBuffer().catch(() => undefined);
    return { status: res.status, ids: [], lastId: null, ended: Promise.resolve(), close: () => undefined };
  }
  const ids: string[] = [];
  const stream: OpenStream = { status: 200, ids, lastId: null, ended: Promise.resolve(), close: () => abort.abort() };
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  const ended = (async () => {
    let buffer = '';
    let id: string | null = null;
    let isEvent = false;
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        buffer += decoder.decode(value, { stream: true });
        let cut: number;
        while ((cut = buffer.indexOf('\n')) >= 0) {
          const line = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 1);
          if (line.startsWith('id: ')) id = line.slice(4);
          else if (line.startsWith('event: ')) isEvent = line !== 'event: resume';
          else if (line === '') {
            if (id !== null) stream.lastId = id;
            if (id !== null && isEvent) ids.push(id);
            id = null;
            isEvent = false;
          }
        }
      }
    } catch {
      // aborted by the test, or the connection dropped (the process was killed)
    }
  })();
  stream.ended = ended;
  return stream;
}
