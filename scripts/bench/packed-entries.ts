// Micro-benchmark: the API's CPU to pack a page of history (pages.ts `packed`:
// strip what the stream implies, BSON, deflate) and to unpack it
// (`pageEvents`: inflate, BSON, restore), per event, against the BSON alone
// (how entries were packed before deflating), and the bytes stored per event.
// A page of 100 and a fragment of 6 events of ~290 bytes of JSON, each with a
// body of its own (random phone numbers and words). CPU from
// process.cpuUsage, so a busy machine slows it less than it would wall time.
//
//   nice -n 19 node --import tsx scripts/bench/packed-entries.ts
import { BSON } from 'mongodb';
import { encodeCursor } from '#shared/cursor.js';
import type { EventDoc } from '#shared/mongo/documents.js';
import { packed, pageEvents, pageId, streamId } from '../../api/src/event-store/pages.js';

const WORDS = 'the a to you at on in of and is it for running about ten minutes late see usual place traffic bridge again call me back when can we meet tomorrow morning after lunch office home order shipped arrived delayed invoice paid thanks ok sure no yes maybe later today soon please confirm code is ready'.split(' ');
const pick = (): string => WORDS[Math.floor(Math.random() * WORDS.length)] as string;
const phone = (): string => `+1${String(Math.floor(1e9 + Math.random() * 9e9))}`;

function events(n: number): EventDoc[] {
  return Array.from({ length: n }, (_, i) => {
    const offset = 123_456 + i * 12;
    const id = `evt_${Math.random().toString(36).slice(2, 12)}${Math.random().toString(36).slice(2, 12)}`;
    const data = { from: phone(), to: phone(), channel: 'sms', text: Array.from({ length: 16 }, pick).join(' '), seq: offset };
    return { _id: id, account_id: 'acct_417', type: 'message.received', data, created_at: new Date(Date.now() + i), partition: 5, offset, cursor: encodeCursor({ partition: 5, offset: BigInt(offset) }) };
  });
}

/** CPU µs per call of f, after a warm-up. */
function cpu(runs: number, f: () => unknown): number {
  for (let i = 0; i < 100; i++) f();
  const t = process.cpuUsage();
  for (let i = 0; i < runs; i++) f();
  const d = process.cpuUsage(t);
  return (d.user + d.system) / runs;
}

console.log('| Entries | BSON per event | Stored per event (deflated; as base64) | Pack, µs per event (before: BSON) | Unpack, µs per event (before: BSON) |');
console.log('|---|---|---|---|---|');
for (const n of [100, 6]) {
  const evs = events(n);
  const id = pageId(streamId('acct_417', 5, null), 0);
  const bytes = evs.reduce((a, e) => a + BSON.calculateObjectSize(e), 0);
  const doc = packed(id, evs, bytes);
  const plain = BSON.serialize({ events: evs });
  const runs = Math.round(200_000 / n);
  const pack = cpu(runs, () => packed(id, evs, bytes)) / n;
  const packBefore = cpu(runs, () => BSON.serialize({ events: evs })) / n;
  const unpack = cpu(runs, () => pageEvents(doc)) / n;
  const unpackBefore = cpu(runs, () => BSON.deserialize(plain)) / n;
  const stored = doc.deflated!.position;
  console.log(`| ${n} | ${Math.round(plain.byteLength / n)} B | ${Math.round(stored / n)} B; ${Math.round((Math.ceil(stored / 3) * 4) / n)} B | ${pack.toFixed(1)} (${packBefore.toFixed(1)}) | ${unpack.toFixed(1)} (${unpackBefore.toFixed(1)}) |`);
}
