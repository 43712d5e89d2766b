// Steady ingest: `rate` events per second (spread over a 5 ms tick), one per
// request or `batch` per request, round-robin over the given accounts. Each event carries its send time
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
function start({ url, token, rate, seconds, accounts, extra = {}, batch = 1 }) {
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
      const due = Math.floor((elapsed * rate) / batch) * batch - s.sent;
      for (let i = 0; i < due; i += batch) {
        const t = now();
        const events = [];
        for (let j = 0; j < batch; j++) events.push(event(accounts[seq % accounts.length], seq++, t, extra));
        s.sent += batch;
        s.inFlight++;
        const body = batch === 1 ? JSON.stringify(events[0]) : JSON.stringify({ events });
        post(target, token, body).then(
          (res) => {
            s.inFlight--;
            for (const [j, e] of res.events.entries()) s.acks.push([e.id, t, now(), events[j].account_id]);
          },
          () => {
            s.inFlight--;
            s.errors += batch;
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
