/**
 * The only module that names MongoDB collections and creates indexes.
 * Code runs on real MongoDB 7 and on FerretDB 1.x alike: no transactions, no
 * change streams, no partial indexes; TTL indexes are created where the server
 * supports them and expiry is also enforced on read.
 */
import { MongoClient, type Collection, type Db, type IndexDescription } from 'mongodb';
import type { BaseConfig } from '../config/index.js';
import type { Logger } from '../log.js';
import type {
  ApiKeyDoc,
  AttemptDoc,
  ClaimDoc,
  DeliveryDoc,
  EventDoc,
  StreamSlotDoc,
  UserDoc,
  WatermarkDoc,
  WebhookDoc,
} from './documents.js';

export * from './documents.js';

export const COLLECTION_NAMES = {
  users: 'users',
  apiKeys: 'api_keys',
  events: 'events',
  watermarks: 'watermarks',
  streamSlots: 'stream_slots',
  webhooks: 'webhooks',
  deliveries: 'deliveries',
  attempts: 'delivery_attempts',
  claims: 'delivery_claims',
  /** Owned by rate-limiter-flexible's Mongo store. */
  rateLimits: 'rate_limits',
} as const;

export interface Collections {
  users: Collection<UserDoc>;
  apiKeys: Collection<ApiKeyDoc>;
  events: Collection<EventDoc>;
  watermarks: Collection<WatermarkDoc>;
  streamSlots: Collection<StreamSlotDoc>;
  webhooks: Collection<WebhookDoc>;
  deliveries: Collection<DeliveryDoc>;
  attempts: Collection<AttemptDoc>;
  claims: Collection<ClaimDoc>;
}

export interface Mongo {
  client: MongoClient;
  db: Db;
  collections: Collections;
  close(): Promise<void>;
}

export function createMongo(config: BaseConfig, opts: { serverSelectionTimeoutMS?: number } = {}): Mongo {
  const client = new MongoClient(config.mongo.url, {
    serverSelectionTimeoutMS: opts.serverSelectionTimeoutMS ?? 5000,
    connectTimeoutMS: 5000,
    maxPoolSize: 50,
    retryWrites: false, // FerretDB 1.x has no retryable writes; our writes are idempotent anyway.
  });
  const db = client.db(config.mongo.dbName);
  const collections: Collections = {
    users: db.collection(COLLECTION_NAMES.users),
    apiKeys: db.collection(COLLECTION_NAMES.apiKeys),
    events: db.collection(COLLECTION_NAMES.events),
    watermarks: db.collection(COLLECTION_NAMES.watermarks),
    streamSlots: db.collection(COLLECTION_NAMES.streamSlots),
    webhooks: db.collection(COLLECTION_NAMES.webhooks),
    deliveries: db.collection(COLLECTION_NAMES.deliveries),
    attempts: db.collection(COLLECTION_NAMES.attempts),
    claims: db.collection(COLLECTION_NAMES.claims),
  };
  return { client, db, collections, close: () => client.close() };
}

const INDEXES: { [K in keyof Collections]: IndexDescription[] } = {
  users: [{ key: { email: 1 }, name: 'email_unique', unique: true }],
  apiKeys: [{ key: { hash: 1 }, name: 'hash_unique', unique: true }],
  events: [
    { key: { account_id: 1, partition: 1, offset: 1 }, name: 'account_position' },
    { key: { account_id: 1, type: 1, partition: 1, offset: 1 }, name: 'account_type_position' },
  ],
  watermarks: [],
  streamSlots: [],
  webhooks: [{ key: { account_id: 1, created_at: 1 }, name: 'account_created' }],
  deliveries: [
    { key: { state: 1, next_attempt_at: 1 }, name: 'due' },
    { key: { subscription_id: 1, created_at: -1 }, name: 'subscription_recent' },
  ],
  attempts: [{ key: { subscription_id: 1, at: -1 }, name: 'subscription_recent' }],
  claims: [{ key: { delivery_id: 1 }, name: 'delivery' }],
};

/** Creates every index; safe to call on every boot and from several processes. */
export async function ensureIndexes(mongo: Mongo, logger: Logger): Promise<void> {
  for (const [name, specs] of Object.entries(INDEXES) as [keyof Collections, IndexDescription[]][]) {
    // One index per command: FerretDB 1.24 drops the connection (a server-side panic) when
    // one createIndexes command re-creates two or more indexes that already exist.
    for (const spec of specs) await mongo.collections[name].createIndexes([spec]);
  }
  logger.debug('mongo indexes ensured');
}

/** Round-trips a command to the server within `timeoutMs`. */
export async function pingMongo(mongo: Mongo, timeoutMs = 2000): Promise<void> {
  await mongo.db.command({ ping: 1 }, { timeoutMS: timeoutMs });
}
