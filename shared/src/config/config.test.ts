import { expect } from 'chai';
import { loadBaseConfig } from './index.js';

describe('config', () => {
  it('has local defaults so a developer needs no environment but NODE_ENV=development', () => {
    const c = loadBaseConfig({ NODE_ENV: 'development' }, 'x');
    expect(c.kafka.eventsTopic).to.equal('events');
    expect(c.kafka.eventsPartitions).to.equal(12);
    expect(c).to.include({ production: false, development: true });
  });

  it('treats an unset NODE_ENV as production: development mode is explicit', () => {
    expect(loadBaseConfig({}, 'x')).to.include({ nodeEnv: 'production', production: true, development: false });
    expect(loadBaseConfig({ NODE_ENV: 'test' }, 'x')).to.include({ production: false, development: false });
  });

  it('names the bad variable', () => {
    expect(() => loadBaseConfig({ EVENTS_PARTITIONS: 'many' }, 'x')).to.throw(/EVENTS_PARTITIONS must be an integer/);
    expect(() => loadBaseConfig({ KAFKA_BROKERS: 'nohost' }, 'x')).to.throw(/KAFKA_BROKERS has a bad entry/);
    expect(() => loadBaseConfig({ MONGO_URL: 'http://x' }, 'x')).to.throw(/MONGO_URL/);
    expect(() => loadBaseConfig({ NODE_ENV: 'prod' }, 'x')).to.throw(/NODE_ENV must be one of/);
  });

  it("reads the events topic's replication settings; unset leaves them to the brokers' defaults", () => {
    expect(loadBaseConfig({}, 'x').kafka).to.include({ eventsReplicationFactor: null, eventsMinInsyncReplicas: null });
    expect(loadBaseConfig({ EVENTS_REPLICATION_FACTOR: '3', EVENTS_MIN_INSYNC_REPLICAS: '2' }, 'x').kafka).to.include({ eventsReplicationFactor: 3, eventsMinInsyncReplicas: 2 });
    expect(() => loadBaseConfig({ EVENTS_REPLICATION_FACTOR: '0' }, 'x')).to.throw(/EVENTS_REPLICATION_FACTOR must be between 1 and 32/);
    expect(() => loadBaseConfig({ EVENTS_REPLICATION_FACTOR: '2', EVENTS_MIN_INSYNC_REPLICAS: '3' }, 'x')).to.throw(/EVENTS_MIN_INSYNC_REPLICAS must not exceed/);
  });
});
