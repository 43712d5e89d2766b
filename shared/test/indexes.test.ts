import { expect } from 'chai';
import { pino } from 'pino';
import { loadBaseConfig } from '../src/config/index.js';
import { conditionalWritesAreAtomic, createMongo, ensureIndexes } from '../src/mongo/index.js';
import { baseTestEnv } from './support/env.js';

describe('mongo indexes', () => {
  it('can be ensured again by a later process on an existing database (a restart)', async () => {
    const env = baseTestEnv();
    const config = loadBaseConfig({ ...env, MONGO_DB: `${env.MONGO_DB}_indexes` }, 'test');
    const log = pino({ level: 'silent' });
    for (let boot = 0; boot < 2; boot++) {
      const mongo = createMongo(config);
      try {
        await ensureIndexes(mongo, log);
        const names = (await mongo.collections.events.indexes()).map((i) => i.name);
        expect(names).to.include.members(['position']);
      } finally {
        await mongo.close();
      }
    }
  });

  it("replaces an earlier version's indexes: a changed key under the same name is built again, a retired one dropped", async () => {
    const env = baseTestEnv();
    const config = loadBaseConfig({ ...env, MONGO_DB: `${env.MONGO_DB}_indexes_old` }, 'test');
    const mongo = createMongo(config);
    try {
      const { events, attempts } = mongo.collections;
      await events.createIndex({ account_id: 1, partition: 1, offset: 1 }, { name: 'account_position' });
      await attempts.createIndex({ subscription_id: 1, at: -1 }, { name: 'subscription_recent' });
      await ensureIndexes(mongo, pino({ level: 'silent' }));
      const eventIndexes = (await events.indexes()).map((i) => i.name);
      expect(eventIndexes).to.include('position').and.not.include('account_position');
      const recent = (await attempts.indexes()).find((i) => i.name === 'subscription_recent');
      expect(recent?.key).to.deep.equal({ subscription_id: 1, at: -1, _id: -1 });
    } finally {
      await mongo.close();
    }
  });

  it('knows the test server for FerretDB: conditional updates are not taken as atomic there', async () => {
    const mongo = createMongo(loadBaseConfig(baseTestEnv(), 'test'));
    try {
      expect(await conditionalWritesAreAtomic(mongo.db)).to.equal(false);
    } finally {
      await mongo.close();
    }
  });
});
