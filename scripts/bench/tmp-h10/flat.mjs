import { MongoClient } from 'mongodb';
const client = new MongoClient('mongodb://127.0.0.1:27027/');
const c = client.db('h10_flat' + process.argv[2]).collection('event_pages');
const page = (id) => ({ _id: id, first: 0, last: 99, bytes: 45000, events: Array.from({ length: 100 }, (_, i) => ({ _id: 'evt_' + i, account_id: 'usr_abc', type: 'message.received', data: { t: 0, seq: i, from: '+14155550123', to: '+14155550199', channel: 'sms', text: 'Running about ten minutes late, see you at the usual place.' }, created_at: new Date(), partition: 0, offset: i, cursor: 'c1_xxxxxx' })) });
let n = 0;
for (const target of [200, 2000, 10000]) {
  const t0 = performance.now();
  while (n < target) { await c.insertMany(Array.from({ length: 200 }, (_, i) => page('s:' + (n + i)))); n += 200; }
  const fill = performance.now() - t0;
  const t = [];
  for (let i = 0; i < 40; i++) { const s = performance.now(); await c.findOne({ _id: 's:' + Math.floor(Math.random() * n) }); t.push(performance.now() - s); }
  t.sort((a, b) => a - b);
  console.log(`${n} page docs (~${n * 100} events): findOne by _id p50 ${t[20].toFixed(1)} ms p90 ${t[36].toFixed(1)} ms (fill ${(fill / 1000).toFixed(0)} s)`);
}
await client.db('h10_flat' + process.argv[2]).dropDatabase();
await client.close();
