/**
 * The immutable documents of the account streams, kept in API memory: a page
 * below a stream's newest one and a directory below its newest one never
 * change again (the writer only appends to the newest page and directory,
 * and a rewrite after a crash builds the same pages), so a copy read once is
 * exact for as long as the stream's topic lives. Keyed by `_id` and the
 * head's topic id (a topic deleted and created again rewrites its streams
 * from offset 0 under the same `_id`s). Least recently used first out,
 * bounded by bytes. A page is kept packed (the BSON of its events as
 * stored, inflated when stored deflated): a third of the heap its decoded
 * events take, and unpacked again in ~0.3 ms for 100 events, against a
 * lookup of several ms.
 */

/** What one cached document is charged besides its bytes. */
const ENTRY_OVERHEAD = 256;

interface CachedPage {
  /** The BSON of `{events}` (inflated; the events as stored, without what their stream implies: pages.ts restores it). */
  packed: Uint8Array;
}

interface CachedDir {
  starts: readonly number[];
}

export class LruCache<V> {
  private readonly entries = new Map<string, { value: V; bytes: number }>();
  private used = 0;
  hits = 0;
  misses = 0;

  constructor(private readonly maxBytes: number) {}

  get enabled(): boolean {
    return this.maxBytes > 0;
  }

  get bytes(): number {
    return this.used;
  }

  get size(): number {
    return this.entries.size;
  }

  get(key: string): V | undefined {
    const entry = this.entries.get(key);
    if (!entry) {
      this.misses += 1;
      return undefined;
    }
    this.hits += 1;
    this.entries.delete(key); // most recently used last
    this.entries.set(key, entry);
    return entry.value;
  }

  /** Keeps `value` (charged `bytes`), dropping the least recently used to stay within the bound; one bigger than the bound is not kept. */
  set(key: string, value: V, bytes: number): void {
    const old = this.entries.get(key);
    if (old) {
      this.entries.delete(key);
      this.used -= old.bytes;
    }
    if (bytes > this.maxBytes) return;
    this.entries.set(key, { value, bytes });
    this.used += bytes;
    for (const [k, e] of this.entries) {
      if (this.used <= this.maxBytes) break;
      this.entries.delete(k);
      this.used -= e.bytes;
    }
  }
}

/** The cache the history reads share in one process (0 bytes: nothing kept, every read goes to the store). */
export class PageCache {
  private readonly lru: LruCache<CachedPage | CachedDir>;

  constructor(maxBytes: number) {
    this.lru = new LruCache(maxBytes);
  }

  get enabled(): boolean {
    return this.lru.enabled;
  }

  get stats(): { bytes: number; entries: number; hits: number; misses: number } {
    return { bytes: this.lru.bytes, entries: this.lru.size, hits: this.lru.hits, misses: this.lru.misses };
  }

  page(topicId: string, id: string): CachedPage | undefined {
    return this.lru.get(`${topicId}|${id}`) as CachedPage | undefined;
  }

  /** A full page (below its stream's newest), packed: never changes again. */
  keepPage(topicId: string, id: string, packed: Uint8Array): void {
    this.lru.set(`${topicId}|${id}`, { packed }, packed.byteLength + ENTRY_OVERHEAD);
  }

  dir(topicId: string, id: string): CachedDir | undefined {
    return this.lru.get(`${topicId}|${id}`) as CachedDir | undefined;
  }

  /** A full directory (below its stream's newest): never changes again. */
  keepDir(topicId: string, id: string, starts: readonly number[]): void {
    this.lru.set(`${topicId}|${id}`, { starts }, 8 * starts.length + ENTRY_OVERHEAD);
  }
}
