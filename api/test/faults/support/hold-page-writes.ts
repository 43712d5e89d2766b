/**
 * Preloaded into an API process by a fault test (NODE_OPTIONS `--import`):
 * holds the materializer's page writes in the middle of a chunk, so the test
 * can freeze the process there. While the file named by HOLD_PAGE_WRITES
 * exists, every write to `event_pages` that replaces a page, directory or
 * head (a `bulkWrite` or `replaceOne`: the page writer's calls, before and
 * since the fence) waits before it is sent; `<file>.held` is written when the
 * first one starts waiting, `<file>.sent` once a held write was answered or
 * refused. The claims (`insertOne`, `updateOne`) and reads pass. Patched in
 * the driver, so the page writer is the production code, unchanged.
 */
import { existsSync, writeFileSync } from 'node:fs';
import { Collection } from 'mongodb';

const file = process.env.HOLD_PAGE_WRITES;
const COLLECTION = 'event_pages';

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

if (file) {
  const proto = Collection.prototype as unknown as Record<'bulkWrite' | 'replaceOne', (this: Collection, ...args: unknown[]) => Promise<unknown>>;
  for (const method of ['bulkWrite', 'replaceOne'] as const) {
    const original = proto[method];
    proto[method] = async function held(this: Collection, ...args: unknown[]): Promise<unknown> {
      if (this.collectionName !== COLLECTION || !existsSync(file)) return original.apply(this, args);
      if (!existsSync(`${file}.held`)) writeFileSync(`${file}.held`, `${method} ${new Date().toISOString()}\n`);
      while (existsSync(file)) await sleep(20);
      try {
        return await original.apply(this, args);
      } finally {
        writeFileSync(`${file}.sent`, `${method} ${new Date().toISOString()}\n`);
      }
    };
  }
}
