/**
 * Builds the account streams (pages.ts) from the events collection, for a
 * store written before they existed. Only documents that hold the whole
 * event (EventDoc, the layout before the streams held the only copy) can be
 * backfilled; an id document (EventIdDoc) holds no body, and its event is in
 * its stream already (the materializer wrote it there), so it is skipped.
 * Run it while no materializer writes
 * (stop the API processes, run it, start the new version): a stream extends
 * only forward, so events older than what a new materializer already
 * appended to a stream would be skipped. Idempotent: run again, it adds
 * nothing. A one-off: it reads each partition in offset order with the
 * events collection's index (a scan on FerretDB), never on a request's path.
 */
import type { Collection } from 'mongodb';
import { isWholeEventDoc, type EventDoc, type StoredEventDoc } from '#shared/mongo/documents.js';
import { PageWriter, type PagesCollection } from './pages.js';

export async function backfillPages(events: Collection<StoredEventDoc>, pages: PagesCollection, partitions: number, onProgress?: (partition: number, written: number) => void): Promise<number> {
  const writer = new PageWriter(pages);
  let total = 0;
  for (let partition = 0; partition < partitions; partition++) {
    let chunk: EventDoc[] = [];
    const flush = async (): Promise<void> => {
      if (chunk.length === 0) return;
      // Offsets of one partition are not contiguous in the collection (other chunks' boundaries): each chunk is written as a fresh start.
      await writer.write(partition, chunk, BigInt(chunk[0]!.offset), BigInt(chunk.at(-1)!.offset));
      await writer.compact(partition, BigInt(chunk[0]!.offset));
      total += chunk.length;
      onProgress?.(partition, total);
      chunk = [];
    };
    for await (const doc of events.find({ partition }).sort({ offset: 1 })) {
      if (!isWholeEventDoc(doc)) continue;
      chunk.push(doc);
      if (chunk.length >= 1000) await flush();
    }
    await flush();
  }
  return total;
}
