import { expect } from 'chai';
import { MongoClient } from 'mongodb';
import { COLLECTION_NAMES, DURABLE_COLLECTIONS, collectionHandles, type Collections } from './index.js';

// No server: a handle's write concern is what the driver sends with each of its writes.
describe('the write concern of each collection handle', () => {
  const client = new MongoClient('mongodb://127.0.0.1:1/');
  const handles = collectionHandles(client.db('write_concern_unit'));
  const concern = (key: keyof Collections) => {
    const wc = handles[key].writeConcern;
    return wc ? { w: wc.w, journal: wc.journal } : undefined;
  };

  it('journals, on a majority, every write something is committed or answered on', () => {
    for (const key of ['watermarks', 'deliveries', 'retryDue', 'users', 'apiKeys', 'apiKeyHashes', 'keyEpoch', 'webhooks', 'secretRotations', 'eventTopics'] as const) {
      expect(concern(key), key).to.deep.equal({ w: 'majority', journal: true });
    }
  });

  it("leaves the hot and the disposable writes at the server's default", () => {
    for (const key of ['events', 'eventPages', 'ingestKeys', 'attempts', 'claims', 'rateLimits', 'streamSlots'] as const) {
      expect(concern(key), key).to.equal(undefined);
    }
  });

  it('names every collection once, under its own name', () => {
    expect(Object.keys(handles).sort()).to.deep.equal(Object.keys(COLLECTION_NAMES).sort());
    for (const key of Object.keys(COLLECTION_NAMES) as (keyof Collections)[]) expect(handles[key].collectionName).to.equal(COLLECTION_NAMES[key]);
    for (const key of DURABLE_COLLECTIONS) expect(COLLECTION_NAMES).to.have.property(key);
  });
});
