// Scenario 6's reference: the polling query itself, straight through the
// MongoDB driver (same filter, sort and limit as the API's readAfter), at the
// same concurrency: the storage ceiling under GET /api/v1/events.
import { MongoClient } from 'mongodb';
import { serve } from './serve.mjs';

serve({
  async run({ url, db, accountId, partition, offsets, connections, seconds, amount }) {
    const client = new MongoClient(url, { maxPoolSize: connections });
    const events = client.db(db).collection('events');
    const end = performance.now() + seconds * 1000;
    let pages = 0;
    let n = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: connections }, async () => {
        while (amount ? n < amount : performance.now() < end) {
          const k = offsets[n++ % offsets.length];
          const docs = await events.find({ account_id: accountId, partition, offset: { $gt: k } }).sort({ partition: 1, offset: 1 }).limit(100).toArray();
          if (docs.length === 100) pages++;
        }
      }),
    );
    const elapsed = (performance.now() - t0) / 1000;
    await client.close();
    return { pages, seconds: elapsed, rps: pages / elapsed };
  },
});
