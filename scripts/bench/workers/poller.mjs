// Cursor polling as fast as it answers, one loop per account: records when
// each event id was first returned by GET /api/v1/events.
import http from 'node:http';
import { serve } from './serve.mjs';

const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
const now = () => performance.timeOrigin + performance.now();
const seen = new Map();
let running = false;
let polls = 0;
const interval = Number(process.env.POLL_INTERVAL_MS ?? 0);

function get(url, key) {
  return new Promise((resolve, reject) => {
    http
      .get(url, { agent, headers: { authorization: `Bearer ${key}` } }, (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => (res.statusCode === 200 ? resolve(JSON.parse(Buffer.concat(chunks).toString('utf8'))) : reject(new Error(`poll ${res.statusCode}`))));
      })
      .on('error', reject);
  });
}

/** Where each account's loop left off: a later start continues from there. */
const cursors = new Map();

/** Loops of an earlier start that are still waiting on a poll end when it returns. */
let generation = 0;

async function loop(base, account, gen) {
  let cursor = cursors.get(account.id) ?? null;
  while (running && gen === generation) {
    const page = await get(`${base}/api/v1/events?limit=500${cursor ? `&since=${cursor}` : ''}`, account.key).catch(() => null);
    polls++;
    if (!page) {
      await new Promise((r) => setTimeout(r, 50));
      continue;
    }
    const t = now();
    for (const e of page.events) if (!seen.has(e.id)) seen.set(e.id, t);
    if (page.cursor) cursor = page.cursor;
    cursors.set(account.id, cursor);
    if (interval > 0 && page.events.length < 500) await new Promise((r) => setTimeout(r, interval));
  }
}

serve({
  start({ url, accounts }) {
    running = true;
    generation++;
    for (const a of accounts) void loop(url, a, generation);
    return {};
  },
  count() {
    return { seen: seen.size, polls };
  },
  stop() {
    // Polls still in flight are left to finish on their own: on a store that
    // scans, one can take longer than the whole window.
    running = false;
    const out = [...seen];
    seen.clear();
    return { seen: out, polls };
  },
});
