// Live readers: long-poll loops (POST /api/v1/events/wait, looping with the
// returned cursor as `since`) and SSE streams (stream token, then
// GET /api/v1/events/stream, reconnecting with Last-Event-ID when a stream
// ends). Records the latency of every event received (its arrival - data.t) and
// which probe each reader has seen. With `hold`, only opens requests that
// never complete, against a bare server (scenario 4's reference).
import http from 'node:http';
import { serve } from './serve.mjs';

const agent = new http.Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: 100_000 });
const now = () => performance.timeOrigin + performance.now();
let running = false;
const readers = [];
let latency = { longpoll: [], stream: [] };
const counters = { errors: 0, lastError: '', reconnects: 0, timeouts: 0, tooMany: 0 };

function request(url, { method = 'GET', headers = {}, body } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, agent, headers: body !== undefined ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...headers } : headers }, (res) => {
      res.arrivedAt = now(); // the reader has its answer (a long-poll's body comes in the same packet as its head)
      resolve(res);
    });
    req.on('error', reject);
    req.end(body);
  });
}

async function readJson(res) {
  const chunks = [];
  for await (const c of res) chunks.push(c);
  const text = Buffer.concat(chunks).toString('utf8');
  return text ? JSON.parse(text) : null;
}

/** `at`: when the event's bytes reached this reader, before this process handled them (see longPollLoop). */
function record(reader, rec, at) {
  const t = rec.data?.t;
  if (typeof t === 'number' && t > 0) latency[reader.kind].push(at - t);
  if (rec.data?.probe !== undefined) reader.probes.add(rec.data.probe);
  reader.events++;
}

function fail(err) {
  counters.errors++;
  counters.lastError = String(err?.message ?? err).slice(0, 200);
  return new Promise((r) => setTimeout(r, 200));
}

async function longPollLoop(base, account, reader, timeoutMs) {
  let since = null;
  while (running) {
    try {
      const body = JSON.stringify(since ? { timeout_ms: timeoutMs, since } : { timeout_ms: timeoutMs });
      reader.open = true;
      const res = await request(`${base}/api/v1/events/wait`, { method: 'POST', headers: { authorization: `Bearer ${account.credential}` }, body });
      const out = await readJson(res);
      reader.open = false;
      if (res.statusCode !== 200) {
        await fail(`wait ${res.statusCode} ${JSON.stringify(out).slice(0, 120)}`);
        continue;
      }
      if (out.event) {
        record(reader, out.event, res.arrivedAt);
        since = out.event.cursor;
        // This process stands in for many clients: the other readers' answers that came in the same turn are
        // noted before this one asks again, so a reader's latency does not include its neighbours' new requests.
        await new Promise((r) => setImmediate(r));
      } else {
        counters.timeouts++;
        if (out.cursor) since = out.cursor;
      }
    } catch (err) {
      reader.open = false;
      if (running) await fail(err);
    }
  }
}

async function streamOnce(base, account, reader) {
  const minted = await request(`${base}/api/v1/events/stream-token`, { method: 'POST', headers: { authorization: `Bearer ${account.credential}` } });
  const tok = await readJson(minted);
  if (minted.statusCode !== 201) throw new Error(`stream-token ${minted.statusCode}`);
  const headers = reader.lastId ? { 'last-event-id': reader.lastId } : {};
  const res = await request(`${base}/api/v1/events/stream?token=${encodeURIComponent(tok.token)}`, { headers });
  if (res.statusCode === 429) {
    counters.tooMany++;
    res.resume();
    await new Promise((r) => setTimeout(r, 1000));
    return;
  }
  if (res.statusCode !== 200) {
    const body = await readJson(res).catch(() => null);
    throw new Error(`stream ${res.statusCode} ${JSON.stringify(body).slice(0, 120)}`);
  }
  reader.open = true;
  reader.res = res;
  res.setEncoding('utf8');
  let buf = '';
  for await (const chunk of res) {
    const at = now();
    buf += chunk;
    let cut;
    while ((cut = buf.indexOf('\n\n')) >= 0) {
      const frame = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      let id = null;
      let data = null;
      let resume = false;
      for (const line of frame.split('\n')) {
        if (line.startsWith('id: ')) id = line.slice(4);
        else if (line.startsWith('data: ')) data = line.slice(6);
        else if (line === 'event: resume') resume = true;
      }
      if (resume && id) reader.lastId = id; // a resume point, not an event
      else if (data) {
        record(reader, JSON.parse(data), at);
        if (id) reader.lastId = id;
      }
    }
  }
  reader.open = false;
  reader.res = null;
  counters.reconnects++;
}

async function streamLoop(base, account, reader) {
  while (running) {
    try {
      await streamOnce(base, account, reader);
    } catch (err) {
      reader.open = false;
      if (running) await fail(err);
    }
  }
}

async function holdLoop(base, reader, method) {
  // Scenario 4's reference: a request the bare server never answers.
  const req = http.request(`${base}/hold`, { method, agent, headers: method === 'POST' ? { 'content-type': 'application/json', 'content-length': 2 } : {} });
  req.on('error', () => (reader.open = false));
  req.on('socket', (s) => s.once('connect', () => (reader.open = true)));
  req.end(method === 'POST' ? '{}' : undefined);
  reader.req = req;
}

serve({
  /**
   * accounts: [{id, credential}] (a session token or an API key); per account `longPolls` loops and `streams` streams.
   * Resolves once every reader has issued its first request.
   */
  async open({ url, accounts, longPolls, streams, timeoutMs = 55_000, hold = false }) {
    running = true;
    for (const account of accounts) {
      for (let i = 0; i < longPolls; i++) readers.push({ kind: 'longpoll', account: account.id, probes: new Set(), events: 0, open: false });
      for (let i = 0; i < streams; i++) readers.push({ kind: 'stream', account: account.id, probes: new Set(), events: 0, open: false, lastId: null });
    }
    const byId = new Map(accounts.map((a) => [a.id, a]));
    // Opened a few at a time, as a fleet of clients would arrive.
    for (let i = 0; i < readers.length; i++) {
      const r = readers[i];
      if (hold) holdLoop(url, r, r.kind === 'longpoll' ? 'POST' : 'GET');
      else if (r.kind === 'longpoll') longPollLoop(url, byId.get(r.account), r, timeoutMs);
      else streamLoop(url, byId.get(r.account), r);
      if (i % 50 === 49) await new Promise((res) => setTimeout(res, 5));
    }
    return { readers: readers.length };
  },
  status() {
    const open = { longpoll: 0, stream: 0 };
    for (const r of readers) if (r.open) open[r.kind]++;
    return { open, ...counters };
  },
  /** Latency samples since the last call (ms), and counters. */
  take() {
    const out = latency;
    latency = { longpoll: [], stream: [] };
    return { latency: out, ...counters };
  },
  /**
   * How many readers of each kind have seen the event marked `marker` (not
   * named `probe`: that field of a request names the handler, see serve.mjs).
   */
  probed({ marker }) {
    const got = { longpoll: 0, stream: 0 };
    const total = { longpoll: 0, stream: 0 };
    for (const r of readers) {
      total[r.kind]++;
      if (r.probes.has(marker)) got[r.kind]++;
    }
    return { got, total };
  },
  close() {
    running = false;
    for (const r of readers) {
      r.res?.destroy();
      r.req?.destroy();
    }
    agent.destroy();
    return {};
  },
});
