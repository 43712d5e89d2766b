import { expect } from 'chai';
import { loadBaseConfig } from '../src/config/index.js';
import { createLogger } from '../src/log.js';
import { createMongo, ensureIndexes } from '../src/mongo/index.js';
import { baseTestEnv, uniqueName } from './support/env.js';

describe('mongo indexes', () => {
  it('can be ensured again on every boot (FerretDB included)', async () => {
    const env = baseTestEnv({ MONGO_DB: `${baseTestEnv().MONGO_DB}_${uniqueName('idx').replace('-', '_')}` });
    const mongo = createMongo(loadBaseConfig(env, 'test'));
    const log = createLogger('test', 'silent');
    try {
      await ensureIndexes(mongo, log);
      await ensureIndexes(mongo, log);
      const names = (await mongo.collections.events.indexes()).map((i) => i.name);
      expect(names).to.include.members(['account_position', 'account_type_position']);
      const rate = await mongo.collections.rateLimits.indexes();
      expect(rate.find((i) => i.name === 'key_unique')).to.include({ unique: true });
    } finally {
      await mongo.db.dropDatabase().catch(() => undefined);
      await mongo.close();
    }
  });
});
