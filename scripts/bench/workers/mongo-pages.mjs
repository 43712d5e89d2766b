// Scenario 6's reference: the page query itself, straight through the MongoDB
// driver (the lookups the API's readAfter makes: the account stream's head,
// its directory, then the page holding the cursor and the next one, each by _id, unpacked), at the
// same concurrency: the storage ceiling under GET /api/v1/events.
import { inflateRawSync } from 'node:zlib';
import { BSON, MongoClient } from 'mongodb';
import { serve } from './serve.mjs';

serve({
  async run({ url, db, accountId, partition, offsets, connections, seconds, amount }) {
    const client = new MongoClient(url, { maxPoolSize: connections });
    const pages = client.db(db).collection('event_pages');
    const stream = `${encodeURIComponent(accountId)}:${partition}`;
    const end = performance.now() + seconds * 1000;
    let done = 0;
    let n = 0;
    const t0 = performance.now();
    await Promise.all(
      Array.from({ length: connections }, async () => {
        while (amount ? n < amount : performance.now() < end) {
          const k0 = offsets[n++ % offsets.length];
          const head = await pages.findOne({ _id: `${stream}:h` });
          const dirs = head?.dirs ?? [];
          const k = Math.max(0, lastAtOrBelow(dirs, k0));
          const dir = await pages.findOne({ _id: `${stream}:d${k}` });
          const at = k * (head?.per_dir ?? 0) + Math.max(0, lastAtOrBelow(dir?.starts ?? [], k0));
          let got = 0;
          for (let p = at; p < (head?.pages ?? 0) && got < 100; p++) {
            const page = await pages.findOne({ _id: `${stream}:${p}` });
            got += eventsOf(page).filter((e) => e.offset > k0).length;
          }
          if (got >= 100) done++;
        }
      }),
    );
    const elapsed = (performance.now() - t0) / 1000;
    await client.close();
    return { pages: done, seconds: elapsed, rps: done / elapsed };
  },
});

/** A page's events: deflated BSON of {events}, packed (that BSON undeflated, written before), or nested (before that). */
function eventsOf(page) {
  if (page?.deflated) return BSON.deserialize(inflateRawSync(page.deflated.buffer.subarray(0, page.deflated.position))).events;
  if (page?.packed) return BSON.deserialize(page.packed.buffer.subarray(0, page.packed.position)).events;
  return page?.events ?? [];
}

/** Index of the last start <= offset (-1 when none). */
function lastAtOrBelow(starts, offset) {
  let lo = 0;
  let hi = starts.length - 1;
  let found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (starts[mid] <= offset) {
      found = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return found;
}
