import { MongoClient } from 'mongodb';
const client = new MongoClient('mongodb://127.0.0.1:27027/');
const db = client.db('h10_probe');
const c = db.collection('events');
const N = 100_000;
if ((await c.estimatedDocumentCount()) < N) {
  await c.drop().catch(() => {});
  for (let i = 0; i < N; i += 5000) {
    const docs = [];
    for (let j = i; j < i + 5000; j++) docs.push({ _id: `acc_${j % 10}:${String(j).padStart(12, '0')}`, account_id: `acc_${j % 10}`, offset: j, type: 'message.received', data: { text: 'Running about ten minutes late, see you at the usual place.', seq: j } });
    await c.insertMany(docs, { ordered: false });
  }
}
const time = async (label, fn, n = 5) => { const t = []; for (let i = 0; i < n; i++) { const t0 = performance.now(); await fn(); t.push(performance.now() - t0); } t.sort((a, b) => a - b); console.log(label, 'median ms', t[n >> 1].toFixed(1)); };
await time('_id equality', () => c.findOne({ _id: 'acc_3:000000050003' }), 20);
await time('_id range sort limit 100', () => c.find({ _id: { $gt: 'acc_3:000000050003', $lt: 'acc_3:999999999999' } }).sort({ _id: 1 }).limit(100).toArray(), 3);
const e = await c.find({ _id: { $gt: 'acc_3:000000050003', $lt: 'acc_3:999999999999' } }).sort({ _id: 1 }).limit(100).explain();
console.log(JSON.stringify(e.queryPlanner), 'filterPushdown', e.filterPushdown, 'sortPushdown', e.sortPushdown, 'limitPushdown', e.limitPushdown);
await client.close();
