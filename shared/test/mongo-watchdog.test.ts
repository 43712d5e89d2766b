import { expect } from 'chai';
import { MongoClient } from 'mongodb';
import { createLogger } from '../src/log.js';
import { MonitorWatchdog } from '../src/mongo/watchdog.js';
import { baseTestEnv } from './support/env.js';

const log = createLogger('test', 'silent');

/** A watchdog whose clock the test moves, so no test waits for a real stuck check. */
function watched(client: MongoClient) {
  let now = 1_000_000;
  const dog = new MonitorWatchdog(client, log, { stuckAfterMs: 30_000, everyMs: 60_000, closeTimeoutMs: 5000, now: () => now });
  return { dog, advance: (ms: number) => (now += ms) };
}

describe('MongoDB monitor watchdog', () => {
  const env = baseTestEnv();
  const dbName = `${env.MONGO_DB}_watchdog`;

  after(async () => {
    const client = new MongoClient(env.MONGO_URL!);
    await client.db(dbName).dropDatabase().catch(() => undefined);
    await client.close();
  });

  it('reconnects a client whose server check never ends, and its collection handles keep working', async () => {
    const client = new MongoClient(env.MONGO_URL!, { serverSelectionTimeoutMS: 5000 });
    const events = client.db(dbName).collection<{ _id: string }>('events');
    const { dog, advance } = watched(client);
    try {
      await events.insertOne({ _id: 'before' });
      client.emit('serverHeartbeatStarted', {} as never); // a check that will never report back
      advance(31_000);
      expect(await dog.check()).to.equal(true);
      expect(dog.recoveries).to.equal(1);
      await events.insertOne({ _id: 'after' });
      expect(await events.countDocuments()).to.equal(2);
    } finally {
      dog.stop();
      await client.close();
    }
  });

  it('leaves a client alone while its checks end, however long it runs', async () => {
    const client = new MongoClient(env.MONGO_URL!, { serverSelectionTimeoutMS: 5000 });
    const { dog, advance } = watched(client);
    try {
      await client.db(dbName).command({ ping: 1 });
      client.emit('serverHeartbeatStarted', {} as never);
      advance(5000);
      client.emit('serverHeartbeatSucceeded', {} as never);
      advance(3_600_000);
      expect(await dog.check()).to.equal(false);
      client.emit('serverHeartbeatStarted', {} as never);
      advance(10_000);
      expect(await dog.check(), 'a check pending 10 s is normal').to.equal(false);
      expect(dog.recoveries).to.equal(0);
    } finally {
      dog.stop();
      await client.close();
    }
  });

  it('keeps trying to connect again while the server cannot be reached', async () => {
    const client = new MongoClient('mongodb://127.0.0.1:9/', { serverSelectionTimeoutMS: 200, connectTimeoutMS: 200 });
    const { dog, advance } = watched(client);
    try {
      client.emit('serverHeartbeatStarted', {} as never);
      advance(31_000);
      expect(await dog.check(), 'first recovery attempt').to.equal(true);
      expect(await dog.check(), 'still disconnected: tries again').to.equal(true);
      expect(dog.recoveries, 'one stuck check, one recovery').to.equal(1);
    } finally {
      dog.stop();
      await client.close();
    }
  });
});
