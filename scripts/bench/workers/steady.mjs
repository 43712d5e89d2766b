// Sustained ingest: `rate` events per second for `seconds`, posted as batches
// of `batch` events (a high-volume producer's shape), round-robin over the
// given accounts, at most `maxInFlight` requests at a time. Keeps counts and
// the acknowledgement latencies, not the events (ten minutes at 5,000/s is
// three million of them).
import http from 'node:http';
import { serve } from './serve.mjs';

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
const now = () => performance.timeOrigin + performance.now();
let state = null;

function post(url, token, body) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json', authorization: `Bearer ${token}`, 'content-length': Buffer.byteLength(body) } }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 202 ? resolve() : reject(new Error(`ingest ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end(body);
  });
}

function start({ url, token, rate, seconds, batch, accounts, body, maxInFlight = 48 }) {
  const target = `${url}/internal/v1/events`;
  const begin = now();
  const s = { sent: 0, acked: 0, errors: 0, inFlight: 0, skippedTicks: 0, ackMs: [], done: null, firstError: null };
  state = s;
  let seq = 0;
  s.done = new Promise((resolve) => {
    const timer = setInterval(() => {
      const elapsed = (now() - begin) / 1000;
      if (elapsed >= seconds) {
        clearInterval(timer);
        const wait = setInterval(() => {
          if (s.inFlight === 0) {
            clearInterval(wait);
            resolve();
          }
        }, 5);
        return;
      }
      let due = Math.floor(elapsed * rate) - s.sent;
      while (due >= batch || (due > 0 && elapsed * rate - s.sent >= batch)) {
        if (s.inFlight >= maxInFlight) {
          s.skippedTicks++;
          break;
        }
        const n = Math.min(batch, due);
        const events = [];
        for (let i = 0; i < n; i++) {
          const account = accounts[seq % accounts.length];
          events.push({ account_id: account, type: 'message.received', data: { ...body, seq: seq++ } });
        }
        s.sent += n;
        due -= n;
        s.inFlight++;
        const t = now();
        post(target, token, JSON.stringify({ events })).then(
          () => {
            s.inFlight--;
            s.acked += n;
            s.ackMs.push(now() - t);
          },
          (err) => {
            s.inFlight--;
            s.errors += n;
            s.firstError ??= String(err.message ?? err);
          },
        );
      }
    }, 5);
  });
  return { started: begin };
}

serve({
  start,
  /** Counts so far (the scenario samples them while the load runs). */
  progress() {
    return { sent: state.sent, acked: state.acked, errors: state.errors, inFlight: state.inFlight };
  },
  async finish() {
    await state.done;
    const ms = Float64Array.from(state.ackMs).sort();
    const at = (p) => (ms.length ? ms[Math.min(ms.length - 1, Math.ceil(p * ms.length) - 1)] : null);
    return { sent: state.sent, acked: state.acked, errors: state.errors, skippedTicks: state.skippedTicks, firstError: state.firstError, requests: ms.length, ackP50: at(0.5), ackP99: at(0.99) };
  },
});
