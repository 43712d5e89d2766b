/**
 * The only module that names MongoDB collections and creates indexes.
 * Code runs on real MongoDB 7 and on FerretDB 1.x alike: no transactions, no
 * change streams; TTL and partial indexes are created where the server
 * supports them (expiry is also enforced on read, and a partial index is only
 * ever the one a missing field would otherwise break).
 */
import { MongoClient, type Collection, type Db, type IndexDescription, type WriteConcernSettings } from 'mongodb';
import type { BaseConfig } from '../config/index.js';
import type { Logger } from '../log.js';
import type {
  ApiKeyDoc,
  ApiKeyHashDoc,
  ApiPodDoc,
  AttemptDoc,
  ClaimDoc,
  DeadEventDoc,
  DeliveryDoc,
  DeliveryProgressDoc,
  DueCursorDoc,
  DueSlotDoc,
  FifoHintDoc,
  FifoSlotDoc,
  StoredEventDoc,
  EventPageDirDoc,
  EventPageDoc,
  EventPageHeadDoc,
  EventTopicDoc,
  IngestKeyDoc,
  KeyEpochDoc,
  RateLimitDoc,
  SecretRotationDoc,
  StreamSlotDoc,
  UserDoc,
  WatermarkDoc,
  WebhookDoc,
  WebhookOpKeyDoc,
  WebhookStatusDoc,
} from './documents.js';
import { recordQueryShapes, type AllowedShape } from './query-shapes.js';
import { watchSlowCommands } from './slow-log.js';
import { MonitorWatchdog } from './watchdog.js';

export * from './documents.js';
export { isDuplicateKey } from './errors.js';

export const COLLECTION_NAMES = {
  users: 'users',
  apiKeys: 'api_keys',
  apiKeyHashes: 'api_key_hashes',
  keyEpoch: 'key_epoch',
  apiPods: 'api_pods',
  events: 'events',
  /** Pages and page heads of the account streams (event-store/pages.ts); found by _id only. */
  eventPages: 'event_pages',
  watermarks: 'watermarks',
  eventTopics: 'event_topics',
  deadEvents: 'dead_events',
  ingestKeys: 'ingest_keys',
  streamSlots: 'stream_slots',
  webhooks: 'webhooks',
  webhookStatus: 'webhook_status',
  secretRotations: 'webhook_secret_rotations',
  deliveries: 'deliveries',
  attempts: 'delivery_attempts',
  claims: 'delivery_claims',
  /** Idempotency keys of the webhook operations (resend, recover, replay). */
  webhookOpKeys: 'webhook_op_keys',
  /** The retry store's time buckets and its cursor (delivery-queue.ts); found by _id only. */
  retryDue: 'delivery_due',
  deliveryProgress: 'delivery_progress',
  /** Owned by rate-limiter-flexible's Mongo store. */
  rateLimits: 'rate_limits',
} as const;

export interface Collections {
  users: Collection<UserDoc>;
  apiKeys: Collection<ApiKeyDoc>;
  apiKeyHashes: Collection<ApiKeyHashDoc>;
  keyEpoch: Collection<KeyEpochDoc>;
  apiPods: Collection<ApiPodDoc>;
  events: Collection<StoredEventDoc>;
  eventPages: Collection<EventPageDoc | EventPageHeadDoc | EventPageDirDoc>;
  watermarks: Collection<WatermarkDoc>;
  eventTopics: Collection<EventTopicDoc>;
  deadEvents: Collection<DeadEventDoc>;
  ingestKeys: Collection<IngestKeyDoc>;
  streamSlots: Collection<StreamSlotDoc>;
  webhooks: Collection<WebhookDoc>;
  webhookStatus: Collection<WebhookStatusDoc>;
  secretRotations: Collection<SecretRotationDoc>;
  deliveries: Collection<DeliveryDoc>;
  attempts: Collection<AttemptDoc>;
  claims: Collection<ClaimDoc>;
  webhookOpKeys: Collection<WebhookOpKeyDoc>;
  retryDue: Collection<DueSlotDoc | DueCursorDoc | FifoSlotDoc | FifoHintDoc>;
  deliveryProgress: Collection<DeliveryProgressDoc>;
  rateLimits: Collection<RateLimitDoc>;
}

/**
 * The write concern of a write that something is answered or committed on:
 * journaled (`j`) so a hard stop of mongod cannot lose it, and on a majority
 * of a replica set (on a standalone server, `majority` is the server itself).
 * Without it, a standalone MongoDB answers once the write is in memory and
 * may lose about the last 100 ms of writes when it is killed.
 */
const DURABLE_WRITE: Readonly<WriteConcernSettings> = Object.freeze({ w: 'majority', journal: true });

/**
 * The collections whose every write is DURABLE_WRITE, and why. The others
 * use the server's default (w:1 on a standalone, majority on a replica set
 * since MongoDB 5.0): what they hold is either covered by a durable write
 * that follows it, or costs only a duplicate when lost.
 * - watermarks: the materializer commits its Kafka offsets after raising the
 *   watermark. MongoDB's journal is one ordered log, so journaling the
 *   watermark write also journals the chunk's events, pages and dead-lettered
 *   events written before it (the hot inserts pay nothing extra).
 * - deliveries, retryDue: a delivery that must be retried exists only there
 *   once its offset is committed; the API queues resends on them and answers.
 * - users, apiKeys, apiKeyHashes, keyEpoch, webhooks, secretRotations: an
 *   answered signup, key rotation or subscription change must not be undone
 *   by a crash of mongod (rare writes: the journal wait costs nothing).
 * - eventTopics: the partition count and topic id every process checks.
 * Left at the default: ingestKeys and webhookOpKeys (a lost outcome makes a
 * retry produce the same ids again, absorbed by those ids), attempts and
 * webhookStatus (history, latest fields), claims and deliveryProgress (a lost
 * one costs a second send: at-least-once), stream slots, API pods and
 * rate-limit windows (short-lived).
 */
export const DURABLE_COLLECTIONS: ReadonlySet<keyof Collections> = new Set<keyof Collections>(['watermarks', 'deliveries', 'retryDue', 'users', 'apiKeys', 'apiKeyHashes', 'keyEpoch', 'webhooks', 'secretRotations', 'eventTopics']);

export interface Mongo {
  client: MongoClient;
  db: Db;
  collections: Collections;
  close(): Promise<void>;
}

/** A handle per collection; those in DURABLE_COLLECTIONS write with DURABLE_WRITE. */
export function collectionHandles(db: Db): Collections {
  const out: Partial<Record<keyof Collections, Collection<never>>> = {};
  for (const key of Object.keys(COLLECTION_NAMES) as (keyof Collections)[]) {
    out[key] = db.collection<never>(COLLECTION_NAMES[key], DURABLE_COLLECTIONS.has(key) ? { writeConcern: DURABLE_WRITE } : {});
  }
  return out as unknown as Collections;
}

/**
 * `log` given: a long-running process's client, watched for the driver's
 * stuck-monitor hang (see watchdog.ts) and reconnected when it happens.
 */
export function createMongo(config: BaseConfig, opts: { serverSelectionTimeoutMS?: number; log?: Logger } = {}): Mongo {
  const client = new MongoClient(config.mongo.url, {
    serverSelectionTimeoutMS: opts.serverSelectionTimeoutMS ?? 5000,
    connectTimeoutMS: 5000,
    maxPoolSize: 50,
    retryWrites: false, // FerretDB 1.x has no retryable writes; our writes are idempotent anyway.
    monitorCommands: (config.mongo.slowMs > 0 && opts.log !== undefined) || config.mongo.queryShapesDir !== undefined,
  });
  if (config.mongo.slowMs > 0 && opts.log) watchSlowCommands(client, opts.log.child({ component: 'mongo' }), config.mongo.slowMs);
  if (config.mongo.queryShapesDir !== undefined) recordQueryShapes(client, config.mongo.queryShapesDir, declaredIndexes, ALLOWED_SHAPES);
  const db = client.db(config.mongo.dbName);
  const collections = collectionHandles(db);
  const watchdog = opts.log ? new MonitorWatchdog(client, opts.log.child({ component: 'mongo' })) : null;
  watchdog?.start();
  return {
    client,
    db,
    collections,
    close: () => {
      watchdog?.stop();
      return client.close();
    },
  };
}

/**
 * How long after its end a rate-limit window is kept: counts are written in
 * batches, so points of a window that has just ended still arrive. The TTL
 * index (MongoDB) and the sweeper (FerretDB) both wait this long.
 */
export const RATE_WINDOW_GRACE_MS = 60_000;

export const INDEXES: { readonly [K in keyof Collections]: IndexDescription[] } = {
  users: [{ key: { email: 1 }, name: 'email_unique', unique: true }],
  apiKeys: [{ key: { hash: 1 }, name: 'hash_unique', unique: true }],
  apiKeyHashes: [],
  keyEpoch: [],
  apiPods: [],
  // A partition's event ids in offset order: the fan-out filling a gap the broker no longer has
  // (readPartition, then the bodies from the streams) and the page backfill. An account's history is read from its streams
  // (event_pages, by _id), so no index here starts with account_id (see RETIRED_INDEXES).
  events: [{ key: { partition: 1, offset: 1 }, name: 'position' }],
  eventPages: [],
  watermarks: [],
  eventTopics: [],
  deadEvents: [],
  // Kept 24 h after the reservation (readers also check expires_at).
  ingestKeys: [{ key: { expires_at: 1 }, name: 'expires_ttl', expireAfterSeconds: 0 }],
  streamSlots: [],
  webhooks: [
    // An account's subscriptions in (created_at, _id) order (GET /webhooks); the consumer's by account ($in).
    { key: { account_id: 1, created_at: 1, _id: 1 }, name: 'account_created' },
    // The disabled-subscriptions gauges (countDisabled, the delivery process's metrics sampler).
    { key: { enabled: 1, disabled_reason: 1 }, name: 'disabled' },
    // Partial: subscriptions created before slots existed have none, and MongoDB indexes a missing
    // field as null, so two of them in one account would break a plain unique index (E11000) and
    // stop every process from starting. FerretDB has no partial indexes and treats missing values as
    // distinct (SQLite's nulls): there the same index is created without the filter.
    { key: { account_id: 1, slot: 1 }, name: 'account_slot_unique', unique: true, partialFilterExpression: { slot: { $exists: true } } },
  ],
  webhookStatus: [],
  secretRotations: [{ key: { subscription_id: 1 }, name: 'subscription' }],
  deliveries: [
    // Pending deliveries (the queue gauges, the first boot's bucketing, an operation's admission), the retention sweep.
    { key: { state: 1, next_attempt_at: 1 }, name: 'due' },
    // A subscription's failed deliveries in (created_at, _id) order (recover, read in either
    // direction), its deliveries of some events (recover), all of them (subscription deleted).
    { key: { subscription_id: 1, created_at: -1, _id: -1 }, name: 'subscription_recent' },
    { key: { updated_at: 1 }, name: 'updated' },
    // An event's deliveries in (created_at, _id) order (GET /api/v1/events/{id}/deliveries).
    { key: { event_id: 1, created_at: 1, _id: 1 }, name: 'event' },
  ],
  attempts: [
    // A subscription's attempts newest first, (at, _id) (GET /webhooks/{id}/deliveries), in a window (stats,
    // endpoint health), all of them (subscription deleted).
    { key: { subscription_id: 1, at: -1, _id: -1 }, name: 'subscription_recent' },
    // The retention sweep.
    { key: { at: 1 }, name: 'at' },
    // A delivery's attempt (resend).
    { key: { delivery_id: 1, at: 1 }, name: 'delivery' },
    // An event's attempts in (at, _id) order (GET /api/v1/events/{id}/deliveries): a delivery sent at
    // once leaves only its attempts, so they are found by event.
    { key: { event_id: 1, at: 1, _id: 1 }, name: 'event' },
    // An account's attempts newest first, (at, _id), over all its subscriptions (GET /api/v1/deliveries,
    // the delivery search: its other filters are checked on the fetched documents, at most a scan bound of
    // them). Last, so that the narrower indexes above are named first for the queries they serve.
    { key: { account_id: 1, at: -1, _id: -1 }, name: 'account_recent' },
  ],
  claims: [{ key: { at: 1 }, name: 'at' }],
  // Kept 24 h (readers also check expires_at; the API sweeps where there are no TTL indexes).
  webhookOpKeys: [{ key: { expires_at: 1 }, name: 'expires_ttl', expireAfterSeconds: 0 }],
  // Only the retention sweep filters on b (below the cursor) and on appended_at (old ordered-queue slots);
  // everything else is by _id.
  retryDue: [
    { key: { b: 1 }, name: 'bucket' },
    { key: { appended_at: 1 }, name: 'fifo_appended' },
  ],
  deliveryProgress: [],
  // Each window is its own document found by _id (limits/window-store.ts);
  // the TTL index removes ended windows where the server has TTL indexes, as
  // late as the sweeper does elsewhere (counts of an ended window still arrive).
  rateLimits: [{ key: { expire: 1 }, name: 'expire_ttl', expireAfterSeconds: RATE_WINDOW_GRACE_MS / 1000 }],
};

/** The declared indexes of a collection, by its name (none for a collection we do not name). */
function declaredIndexes(collection: string): readonly IndexDescription[] {
  const key = (Object.keys(COLLECTION_NAMES) as (keyof Collections)[]).find((k) => COLLECTION_NAMES[k] === collection);
  return key ? INDEXES[key] : [];
}

/**
 * Query shapes no index serves, on purpose (the query-shape check,
 * query-shapes.ts, fails on any other): each a rare path where an index
 * would cost every write for a read that seldom runs.
 */
const ALLOWED_SHAPES: readonly AllowedShape[] = [
  { shape: 'webhooks {eq: -; range: -; sort: -}', reason: "the delivery process's subscription table loads every subscription, by design (subscription-table.ts)" },
  { shape: 'api_pods {eq: -; range: -; sort: -}', reason: "the key cache's sync reads every API pod's record: one per running API process" },
  { shape: 'watermarks {eq: topic; range: topic_id; sort: -}', reason: 'the topic guard, once per process start, when the topic was re-created: one watermark per partition' },
];

/**
 * Indexes earlier versions created that must go: `key_unique` allowed one
 * rate-limit document per key, which per-window documents would collide on;
 * the events' account indexes served reads that now go to the account
 * streams, and cost every event insert.
 */
const RETIRED_INDEXES: Partial<Record<keyof Collections, string[]>> = {
  rateLimits: ['key_unique'],
  events: ['account_position', 'account_type_position'],
};

/** IndexNotFound (27) or NamespaceNotFound (26): nothing to drop. */
function isMissing(err: unknown): boolean {
  const code = (err as { code?: unknown })?.code;
  return code === 27 || code === 26;
}

/** FerretDB 1.x answers a TTL or a partial index with NotImplemented (238). */
function isNotImplemented(err: unknown): boolean {
  return (err as { code?: unknown })?.code === 238 || (err as { codeName?: unknown })?.codeName === 'NotImplemented';
}

/** IndexOptionsConflict (85) or IndexKeySpecsConflict (86): an index of that name exists with other options. */
function isConflict(err: unknown): boolean {
  const code = (err as { code?: unknown })?.code;
  return code === 85 || code === 86;
}

type IndexTarget = Pick<Collection, 'createIndex' | 'dropIndex'>;

/**
 * Creates one index. An index of the same name with other options or keys
 * (created by an earlier version: `account_slot_unique` before it was
 * partial, an index that gained an `_id` tie-breaker) is dropped and created
 * again. Where the server has no TTL or partial indexes
 * (FerretDB), a TTL index is skipped (readers check expiry, sweepers remove)
 * and a partial one is created without its filter.
 */
export async function ensureIndex(collection: IndexTarget, name: string, spec: IndexDescription, logger: Logger): Promise<void> {
  const { key, ...options } = spec;
  try {
    await collection.createIndex(key, options);
  } catch (err) {
    if (isConflict(err)) {
      logger.info({ collection: name, index: options.name }, 'index exists with other options; dropping and creating it again');
      await collection.dropIndex(options.name!).catch((e: unknown) => {
        if (!isMissing(e)) throw e;
      });
      return ensureIndex(collection, name, spec, logger);
    }
    if (!isNotImplemented(err)) throw err;
    if (options.partialFilterExpression !== undefined) {
      const { partialFilterExpression: _dropped, ...whole } = options;
      logger.info({ collection: name, index: options.name }, 'server has no partial indexes; creating the index over every document');
      return ensureIndex(collection, name, { key, ...whole }, logger);
    }
    if (options.expireAfterSeconds === undefined) throw err;
    // Readers check expiry themselves; only the clean-up of old documents is lost.
    logger.info({ collection: name, index: options.name }, 'server has no TTL indexes; expired documents stay until a sweeper removes them');
  }
}

/** Creates every index; safe to call on every boot and from several processes. */
export async function ensureIndexes(mongo: Mongo, logger: Logger): Promise<void> {
  for (const [name, specs] of Object.entries(INDEXES) as [keyof Collections, IndexDescription[]][]) {
    // One index per call: FerretDB 1.24 panics on a multi-index createIndexes
    // when the indexes already exist (a second boot), closing the connection.
    for (const spec of specs) await ensureIndex(mongo.collections[name], name, spec, logger);
  }
  for (const [name, indexNames] of Object.entries(RETIRED_INDEXES) as [keyof Collections, string[]][]) {
    for (const index of indexNames) {
      try {
        await mongo.collections[name].dropIndex(index);
        logger.info({ collection: name, index }, 'dropped a retired index');
      } catch (err) {
        if (!isMissing(err)) throw err;
      }
    }
  }
  logger.debug('mongo indexes ensured');
}

const atomicity = new WeakMap<Db, Promise<boolean>>();

/**
 * Whether a conditional update (`updateOne({_id, lease_id}, ...)`) is atomic
 * on this server: true on MongoDB; false on FerretDB 1.x, which applies
 * concurrent updates of one document non-atomically and reads the whole
 * collection for any filter but a plain `_id` (see docs/operations.md), so
 * callers keep an `_id` read then an `_id` write there. Asked once per
 * database handle (`buildInfo` names FerretDB in `ferretdbVersion`); an
 * error is not remembered, and answers false meanwhile.
 */
export function conditionalWritesAreAtomic(db: Pick<Db, 'admin'>): Promise<boolean> {
  const known = atomicity.get(db as Db);
  if (known) return known;
  const asked = db
    .admin()
    .command({ buildInfo: 1 })
    .then((info) => info.ferretdbVersion === undefined);
  atomicity.set(db as Db, asked);
  return asked.catch(() => {
    atomicity.delete(db as Db);
    return false;
  });
}

/** Round-trips a command to the server within `timeoutMs`. */
export async function pingMongo(mongo: Mongo, timeoutMs = 2000): Promise<void> {
  await mongo.db.command({ ping: 1 }, { timeoutMS: timeoutMs });
}
