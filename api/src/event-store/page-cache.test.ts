import { expect } from 'chai';
import { LruCache, PageCache } from './page-cache.js';

describe('event store: the cache of immutable pages and directories (page-cache.ts)', () => {
  it('drops the least recently used entries to stay within its byte bound; a get refreshes an entry', () => {
    const lru = new LruCache<string>(100);
    lru.set('a', 'A', 40);
    lru.set('b', 'B', 40);
    expect(lru.get('a')).to.equal('A'); // a is now the most recently used
    lru.set('c', 'C', 40); // 120 > 100: b goes
    expect(lru.get('b')).to.equal(undefined);
    expect(lru.get('a')).to.equal('A');
    expect(lru.get('c')).to.equal('C');
    expect(lru.bytes).to.equal(80);
    expect(lru.size).to.equal(2);
  });

  it('replaces an entry under the same key (charged once), and never keeps one bigger than the whole bound', () => {
    const lru = new LruCache<string>(100);
    lru.set('a', 'A', 30);
    lru.set('a', 'A2', 50);
    expect(lru.get('a')).to.equal('A2');
    expect(lru.bytes).to.equal(50);
    lru.set('huge', 'H', 101);
    expect(lru.get('huge')).to.equal(undefined);
    expect(lru.get('a')).to.equal('A2');
    lru.set('a', 'A3', 101); // too big: the old value goes too (never a stale one)
    expect(lru.get('a')).to.equal(undefined);
    expect(lru.bytes).to.equal(0);
  });

  it('counts hits and misses; a bound of 0 keeps nothing', () => {
    const lru = new LruCache<string>(0);
    expect(lru.enabled).to.equal(false);
    lru.set('a', 'A', 1);
    expect(lru.get('a')).to.equal(undefined);
    expect([lru.hits, lru.misses]).to.deep.equal([0, 1]);
  });

  it('keys pages and directories by topic id and _id: a stream of a topic created again is not answered from the old one', () => {
    const cache = new PageCache(1 << 20);
    const packed = new Uint8Array(100);
    cache.keepPage('topic-1', 's:0', packed);
    cache.keepDir('topic-1', 's:d0', [0, 100]);
    expect(cache.page('topic-1', 's:0')?.packed).to.equal(packed);
    expect(cache.dir('topic-1', 's:d0')?.starts).to.deep.equal([0, 100]);
    expect(cache.page('topic-2', 's:0')).to.equal(undefined);
    expect(cache.dir('topic-2', 's:d0')).to.equal(undefined);
    expect(cache.stats.entries).to.equal(2);
  });
});
