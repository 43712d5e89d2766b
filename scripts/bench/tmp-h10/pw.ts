import { MongoClient } from 'mongodb';
import { PageWriter } from '../../../api/src/event-store/pages.js';
import { buildEnvelope, toEventDoc } from '../../../shared/src/eventlog/envelope.js';
const client = new MongoClient('mongodb://127.0.0.1:27027/');
const pages = client.db('h10_pw' + process.argv[2]).collection<any>('event_pages');

const w = new PageWriter(pages);
const acct = 'usr_pw' + Date.now();
let off = 0;
for (let round = 0; round < 4; round++) {
  const docs = [];
  for (let j = 0; j < 500; j++) docs.push(toEventDoc(buildEnvelope({ account_id: acct, type: 'message.sent', data: { i: j } } as any, new Date()), { partition: 0, offset: BigInt(off + j) }));
  const t0 = performance.now();
  await w.write(0, docs, BigInt(off), BigInt(off + 499));
  console.log('chunk of 500, one account', (performance.now() - t0).toFixed(0), 'ms');
  off += 500;
}
for (let round = 0; round < 3; round++) {
  const docs = [];
  for (let j = 0; j < 500; j++) docs.push(toEventDoc(buildEnvelope({ account_id: acct + (j % 50), type: j % 2 ? 'message.sent' : 'call.started', data: { i: j } } as any, new Date()), { partition: 0, offset: BigInt(off + j) }));
  const t0 = performance.now();
  await w.write(0, docs, BigInt(off), BigInt(off + 499));
  console.log('chunk of 500, 50 accounts', (performance.now() - t0).toFixed(0), 'ms');
  off += 500;
}
await client.close();
