/**
 * Sends events for an account through the ingest endpoint, for demos and load.
 *
 *   npm run emit -- --account usr_… [--type message.received|random] [--count 10]
 *                   [--rate 5] [--batch 1] [--data '{"text":"hi"}'] [--url …] [--token …] [--quiet]
 *
 * --rate is events per second (0 = as fast as the API takes them); --batch
 * sends that many events per request. The API address and ingest token come
 * from --url / --token, else API_URL / INGEST_TOKEN, else the local defaults.
 */
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { DEV_INGEST_TOKEN } from '../api/src/config.js';
import { PRODUCER_EVENT_TYPES, type EventType, type ProducerEventType } from '#shared/eventlog/types.js';

const USAGE = 'usage: npm run emit -- --account <account id> [--type <type>|random] [--count N] [--rate N] [--batch N] [--data JSON] [--url URL] [--token TOKEN] [--quiet]';

function fail(message: string): never {
  console.error(`emit: ${message}\n${USAGE}`);
  process.exit(2);
}

function positiveInt(raw: string, name: string, min: number): number {
  if (!/^\d+$/.test(raw) || Number(raw) < min) fail(`--${name} must be an integer >= ${min}`);
  return Number(raw);
}

const { values } = parseArgs({
  options: {
    account: { type: 'string' },
    type: { type: 'string', default: 'message.received' },
    count: { type: 'string', default: '10' },
    rate: { type: 'string', default: '5' },
    batch: { type: 'string', default: '1' },
    data: { type: 'string' },
    url: { type: 'string', default: process.env.API_URL || 'http://127.0.0.1:3000' },
    token: { type: 'string', default: process.env.INGEST_TOKEN || DEV_INGEST_TOKEN },
    quiet: { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
});

if (values.help) {
  console.log(USAGE);
  process.exit(0);
}
const account = values.account || fail('--account is required (it was missing or empty)');
const typeArg = values.type;
if (typeArg !== 'random' && !(PRODUCER_EVENT_TYPES as readonly string[]).includes(typeArg)) fail(`--type must be one of ${PRODUCER_EVENT_TYPES.join(', ')} or random`);
const count = positiveInt(values.count, 'count', 1);
const rate = positiveInt(values.rate, 'rate', 0);
const batchSize = Math.min(positiveInt(values.batch, 'batch', 1), 1000);
let extra: Record<string, unknown> = {};
if (values.data !== undefined) {
  try {
    extra = JSON.parse(values.data) as Record<string, unknown>;
  } catch {
    fail('--data must be a JSON object');
  }
  if (extra === null || typeof extra !== 'object' || Array.isArray(extra)) fail('--data must be a JSON object');
}

function sampleData(type: EventType, seq: number): Record<string, unknown> {
  const id = randomBytes(4).toString('hex');
  const samples: Record<ProducerEventType, Record<string, unknown>> = {
    'call.started': { call_id: `call_${id}`, direction: 'inbound', from: '+15550100', to: '+15550199' },
    'call.ended': { call_id: `call_${id}`, duration_s: 42, hangup_by: 'caller' },
    'call.transcribed': { call_id: `call_${id}`, transcript: 'Hello, I would like to book a table.' },
    'call.completed': { call_id: `call_${id}`, summary: 'Booked a table for two.', sentiment: 'positive' },
    'call.takeover': { call_id: `call_${id}`, agent: 'alex@example.com' },
    'message.received': { message_id: `msg_${id}`, channel: 'sms', from: '+15550100', text: `Hello #${seq}` },
    'message.sent': { message_id: `msg_${id}`, channel: 'whatsapp', to: '+15550100', text: `Reply #${seq}` },
    'webhook.ping': { note: 'emitted by scripts/emit' },
  };
  return { seq, ...samples[type as ProducerEventType], ...extra };
}

function pickType(): EventType {
  if (typeArg !== 'random') return typeArg as EventType;
  return PRODUCER_EVENT_TYPES[Math.floor(Math.random() * PRODUCER_EVENT_TYPES.length)] as EventType;
}

const endpoint = `${values.url.replace(/\/+$/, '')}/internal/v1/events`;
const started = Date.now();
let sent = 0;
while (sent < count) {
  const size = Math.min(batchSize, count - sent);
  const events = Array.from({ length: size }, (_, i) => {
    const type = pickType();
    return { account_id: account, type, data: sampleData(type, sent + i + 1), occurred_at: new Date().toISOString() };
  });
  let res: Response;
  try {
    res = await fetch(endpoint, {
      method: 'POST',
      headers: { authorization: `Bearer ${values.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ events }),
    });
  } catch (err) {
    console.error(`emit: cannot reach ${endpoint}: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  }
  const body = (await res.json().catch(() => null)) as { events?: { id: string; cursor: string }[] } | null;
  if (res.status !== 202 || !body?.events) {
    console.error(`emit: ${res.status} ${JSON.stringify(body)}`);
    process.exit(1);
  }
  if (!values.quiet) body.events.forEach((e, i) => console.log(`${events[i]!.type}\t${e.id}\t${e.cursor}`));
  sent += size;
  if (rate > 0 && sent < count) {
    const due = started + (sent / rate) * 1000;
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, due - Date.now())));
  }
}
const seconds = (Date.now() - started) / 1000;
console.error(`emit: ${sent} events for ${account} in ${seconds.toFixed(1)} s (${(sent / Math.max(seconds, 0.001)).toFixed(0)}/s)`);
