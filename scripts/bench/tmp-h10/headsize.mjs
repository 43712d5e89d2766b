import { MongoClient } from 'mongodb';
const client = new MongoClient('mongodb://127.0.0.1:27027/');
const c = client.db('h10_head').collection('p');
for (const n of [100, 1000, 10000]) {
  await c.replaceOne({ _id: 'h' + n }, { _id: 'h' + n, starts: Array.from({ length: n }, (_, i) => i * 100 + 1234567) }, { upsert: true });
  const a = [];
  for (let i = 0; i < 10; i++) { const s = performance.now(); await c.findOne({ _id: 'h' + n }); a.push(performance.now() - s); }
  a.sort((x, y) => x - y);
  console.log('head with', n, 'starts: findOne p50', a[5].toFixed(1), 'ms');
}
await client.db('h10_head').dropDatabase();
await client.close();
