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
        expect(names).to.include.members(['account_position', 'account_type_position']);
      } finally {
        await mongo.close();
      }
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
