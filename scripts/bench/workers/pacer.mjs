// Steady ingest: `rate` single-event requests per second (spread over a 5 ms
// tick), round-robin over the given accounts. Each event carries its send time
// in data.t; the worker keeps (id, sent, acknowledged) of every event.
import http from 'node:http';
import { serve } from './serve.mjs';

const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
const now = () => performance.timeOrigin + performance.now();
let state = null;

function post(url, token, body) {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json', authorization: `Bearer ${token}`, 'content-length': Buffer.byteLength(body) } }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        if (res.statusCode !== 202) reject(new Error(`ingest ${res.statusCode}: ${text.slice(0, 200)}`));
        else resolve(JSON.parse(text));
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

function event(account, seq, t, extra) {
  return {
    account_id: account,
    type: 'message.received',
    data: { t, seq, ...extra, from: '+14155550123', to: '+14155550199', channel: 'sms', text: 'Running about ten minutes late, see you at the usual place.' },
  };
}

/** Starts sending; `seconds` of steady load, then stops by itself. */
function start({ url, token, rate, seconds, accounts, extra = {} }) {
  const target = `${url}/internal/v1/events`;
  const begin = now();
  const s = { sent: 0, acks: [], errors: 0, inFlight: 0, done: null };
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
      const due = Math.floor(elapsed * rate) - s.sent;
      for (let i = 0; i < due; i++) {
        const account = accounts[seq % accounts.length];
        const t = now();
        const n = seq++;
        s.sent++;
        s.inFlight++;
        post(target, token, JSON.stringify(event(account, n, t, extra))).then(
          (body) => {
            s.inFlight--;
            s.acks.push([body.events[0].id, t, now(), account]);
          },
          () => {
            s.inFlight--;
            s.errors++;
          },
        );
      }
    }, 5);
  });
  return { started: begin };
}

/** One event per account, all at once (scenario 4's release). */
async function burst({ url, token, accounts, extra = {} }) {
  const target = `${url}/internal/v1/events`;
  const t = now();
  const body = JSON.stringify({ events: accounts.map((a, i) => event(a, i, t, extra)) });
  const res = await post(target, token, body);
  return { sentAt: t, ackAt: now(), count: res.events.length };
}

serve({
  start,
  async finish() {
    await state.done;
    return { sent: state.sent, errors: state.errors, acks: state.acks };
  },
  burst,
});
