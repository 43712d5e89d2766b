/** The shape of every stored document, by collection. */
import type { EventType } from '../eventlog/types.js';
import type { Binary } from 'mongodb';

export interface PasswordHash {
  algo: 'scrypt';
  salt: string; // base64
  hash: string; // base64
  N: number;
  r: number;
  p: number;
  keylen: number;
}

export interface UserDoc {
  _id: string;
  email: string;
  name: string;
  phone: string | null;
  plan: string | null;
  password: PasswordHash;
  created_at: Date;
}

/** One document per account: rotating replaces the hash in place, atomically. */
export interface ApiKeyDoc {
  _id: string; // user id
  hash: string; // sha256 hex of the raw key
  preview: string;
  created_at: Date;
}

/**
 * Where a key hash points (`_id` is the hash): lets authentication find an API
 * key by `_id`, a primary-key lookup on every server (FerretDB pushes down no
 * other filter). The account's ApiKeyDoc stays the authority: a hash counts
 * only while it is the account's current one, so a rotation or revocation that
 * fails before removing the old pointer still ends the old key.
 */
export interface ApiKeyHashDoc {
  _id: string; // sha256 hex of the raw key
  account_id: string;
  created_at: Date;
}

/**
 * The key epoch (`_id` 'api_keys'): bumped by every rotation and revocation,
 * so every API process drops its key cache (api/src/features/keys/cache.ts).
 */
export interface KeyEpochDoc {
  _id: string;
  seq: number;
  /** Changes in flight (id -> when the mark lapses): caches answer from the store only meanwhile. */
  pending?: Record<string, Date>;
}

/**
 * One live API process (`_id` its instance id), written by its key cache
 * every sync: the key epoch it has applied and when (its wall clock) the
 * sync that applied it began. A rotation waits for every process seen
 * recently to have applied the rotation's epoch.
 */
export interface ApiPodDoc {
  _id: string;
  applied: number;
  at: Date;
}

/**
 * One fixed window of one rate-limit key (api/src/features/limits/window-store.ts):
 * `_id` is `<limiter>:<subject>:<window start, ms>`, `key` is `<limiter>:<subject>`.
 */
export interface RateLimitDoc {
  _id: string;
  key: string;
  points: number;
  expire: Date | null;
}

export interface EventDoc {
  _id: string; // event id
  account_id: string;
  type: EventType;
  data: Record<string, unknown>;
  created_at: Date;
  occurred_at?: Date;
  partition: number;
  offset: number;
  cursor: string;
  /** A stand-in for an event the store refused (its data is in dead_events): readers see it, without data. */
  data_unavailable?: true;
}

/**
 * A document of the `events` collection as the materializer writes it: where
 * an event is, not what it says. The event itself (type, data, times, cursor)
 * is written once, into its account's stream (event_pages, pages.ts); this
 * document keeps the id unique (a producer's retry the broker took twice is
 * stored once, at its first position), finds the event by id (then read from
 * the stream) and lists a partition's events by position (the `position`
 * index). Documents written before the body lived in the streams only hold
 * the whole event (EventDoc) and are read as they are.
 */
export interface EventIdDoc {
  _id: string; // event id
  account_id: string;
  partition: number;
  offset: number;
  /** A stand-in for an event the store refused (its data is in dead_events). */
  data_unavailable?: true;
}

/** What the `events` collection holds: ids (EventIdDoc), or whole events written before (EventDoc). */
export type StoredEventDoc = EventIdDoc | EventDoc;

/** The `events` collection's document of an event: its id, account and position (and `data_unavailable` on a stand-in), no body. */
export function eventIdDoc(doc: EventDoc): EventIdDoc {
  const out: EventIdDoc = { _id: doc._id, account_id: doc.account_id, partition: doc.partition, offset: doc.offset };
  if (doc.data_unavailable) out.data_unavailable = true;
  return out;
}

/** A document of the `events` collection that holds the whole event (written before the streams held the only copy). */
export function isWholeEventDoc(doc: StoredEventDoc): doc is EventDoc {
  return 'data' in doc && doc.data !== undefined;
}

/**
 * One page of an account's event stream on one partition (event-store/pages.ts):
 * a run of consecutive entries of the stream, oldest first. A stream is either
 * all the account's events or those of one type (whose entries are offsets
 * into the account's stream; pages written before that hold the events).
 * `_id` is `<stream>:<n>`, pages numbered from 0; the stream's head document
 * lists where each starts. A fragment (`<stream>:f<n>`, one chunk's entries
 * of the stream, not yet compacted into pages) has the same shape.
 */
export interface EventPageDoc {
  _id: string;
  /** Offset of the first and last event held. */
  first: number;
  last: number;
  /** BSON bytes of the events held (bounded with their count). */
  bytes: number;
  /** Events held (absent in a packed page). */
  count?: number;
  /**
   * The events, packed: the BSON of `{events: EventDoc[]}` as one binary value
   * (pages written before `deflated`; older ones may hold them nested). FerretDB converts every nested
   * field of a document on each read (a page of 100 nested events cost ~13 ms
   * to fetch, packed ~3 ms); the reader unpacks it in ~0.3 ms.
   */
  packed?: Binary;
  /**
   * The events as written now: the BSON of `{events}`, deflated (raw
   * deflate, node:zlib), each event without `account_id`, `partition` and
   * `cursor` where the stream implies them (event-store/pages.ts restores
   * them on read).
   */
  deflated?: Binary;
  /** The events as nested documents: pages written before `packed` (still read). */
  events?: EventDoc[];
  /** On a fragment (`<stream>:f<n>`): the Kafka id of the topic it was written from (see EventPageHeadDoc.topic_id). */
  topic_id?: string;
}

/**
 * The head of a stream (`_id` is `<stream>:h`): how many pages it has, and
 * where each directory starts. Directory k (`<stream>:d<k>`) lists where
 * pages k * per_dir .. k * per_dir + per_dir - 1 start, so no document holds
 * one number per page of a long history (FerretDB reads an array of 10,000
 * numbers in ~120 ms, of 1,000 in ~7 ms).
 */
export interface EventPageHeadDoc {
  _id: string;
  pages: number;
  per_dir: number;
  /** `dirs[k]` is the first offset of directory k (of its first page). */
  dirs: number[];
  /**
   * The Kafka id of the event topic the stream was last written from. A topic deleted and
   * created again under the same name starts its offsets at 0 again: a stream of the earlier
   * topic starts over instead of taking the new offsets for ones it holds (absent: written
   * before the field existed, or by the backfill; taken as the current topic).
   */
  topic_id?: string;
  /**
   * The first fragment (`<stream>:f<n>`) not compacted into pages: the stream's
   * newest entries are in fragments frag, frag + 1, … up to the first missing
   * one (absent: 0, a head written before fragments existed).
   */
  frag?: number;
  /** The last offset the pages hold (absent: a head written before fragments existed; its newest page says). */
  through?: number;
}

/** One directory of a stream: `starts[i]` is the first offset of page k * per_dir + i. */
export interface EventPageDirDoc {
  _id: string;
  starts: number[];
}

/**
 * Highest offset of a partition that is fully written to `events` and the
 * account streams, in the life of the topic whose Kafka id is `topic_id` (a
 * recreated topic starts again).
 */
export interface WatermarkDoc {
  _id: string; // `${topic}:${partition}`
  topic: string;
  partition: number;
  offset: number;
  /** The Kafka topic id of the log the offset belongs to; absent on watermarks written before it was recorded. */
  topic_id?: string;
  updated_at: Date;
}

/**
 * What the deployment knows of its event topic (`_id` is the topic name),
 * recorded on first start: the partition count, which cursors and account
 * placement depend on, and the Kafka topic id of the log the watermarks
 * belong to.
 */
export interface EventTopicDoc {
  _id: string;
  partitions: number;
  topic_id: string | null;
  recorded_at: Date;
  updated_at: Date;
}

/**
 * An event the store refused again and again (the materializer's dead letter):
 * kept here with its error; readers get a stand-in record marked
 * `data_unavailable` at its position (`_id` is the event id).
 */
export interface DeadEventDoc {
  _id: string;
  account_id: string;
  type: EventType;
  topic: string;
  partition: number;
  offset: number;
  /** The message as it was on the topic (UTF-8 JSON). */
  envelope: string;
  error: string;
  failures: number;
  at: Date;
}

/**
 * One idempotency key of an ingest request (`_id` is sha256 of the ingest
 * token and the key, scoped by kind). Reserved before producing, with the
 * event ids and times the request's events get; the outcome is stored after
 * Kafka's acknowledgement. A retry with the key reuses those ids, so an event
 * written twice by a failed attempt and its retry is stored once.
 */
export interface IngestKeyDoc {
  _id: string;
  kind: 'request' | 'event';
  /** sha256 of the request's events (or the one event), to refuse a key reused for another body. */
  body_hash: string;
  state: 'pending' | 'failed' | 'done';
  /** The attempt holding the reservation while pending. */
  attempt: string;
  /** A pending reservation older than this is from a dead attempt and may be taken over. */
  lease_until: Date;
  ids: string[];
  created_at: string[];
  cursors: string[] | null;
  expires_at: Date;
  /** The account a per-event key belongs to (absent on request keys, and on event keys stored before keys were per account). */
  account_id?: string;
}

/**
 * One step of an ingest key after its reservation, in `ingest_keys` beside
 * the key (`_id` = `<key _id>:<its attempt 0>:<n>`, n = 1, 2, ...; swept with the key by
 * `expires_at`). Step n ends attempt n - 1 (the reservation is attempt 0):
 * `done` (its outcome), `released` (it failed), or `attempt` (a retry took
 * the key over after attempt n - 1 failed or its lease ran out). Each is
 * written once, by a unique insert, never updated: of an outcome and a
 * takeover of the same attempt exactly one is stored.
 */
export interface IngestKeyStepDoc {
  _id: string;
  kind: 'attempt' | 'released' | 'done';
  /** kind attempt: the attempt that took the key over, and until when it holds it. */
  attempt: string | null;
  lease_until: Date | null;
  /** kind done: the cursors of the key's events. */
  cursors: string[] | null;
  expires_at: Date;
}

/**
 * One of an account's stream slots (`${account_id}:${n}`, n < the per-account
 * maximum), held while a stream is open. Taking a slot is an insert, which
 * the unique _id makes atomic on every server; a holder that dies stops
 * renewing, and its slot is taken over once `expires_at` has passed.
 */
export interface StreamSlotDoc {
  _id: string;
  account_id: string;
  lease_id: string;
  holder: string; // instance id of the API process, for operators
  expires_at: Date;
}

/**
 * A subscription's settings. Only the API writes these documents (but for
 * the delivery process's endpoint-health disabling, once per failing
 * period: delivery/src/endpoint-health.ts): FerretDB
 * 1.x applies an update as read-whole-document-then-write, so two concurrent
 * updates of one document lose one of them even when they set different
 * fields (docs/decisions.md). The delivery process's
 * last-attempt status therefore lives apart, in WebhookStatusDoc; the
 * last_* fields here are only read from documents written before that split.
 */
export interface WebhookDoc {
  _id: string;
  account_id: string;
  url: string;
  events: string[];
  description: string;
  secret_enc: string; // SecretBox: `v1.` + base64 of iv|tag|ciphertext, bound to _id
  /**
   * 0 ≤ slot < the per-account cap, unique per account: taking a slot by
   * insert is what enforces the cap under concurrent creates.
   */
  slot: number;
  created_at: Date;
  last_status: number | null;
  last_delivery_at: Date | null;
  last_error: string | null;
  /**
   * false: nothing is sent to it (PATCH enabled:false). Absent on documents
   * written before the field existed, which are enabled.
   */
  enabled?: boolean;
  /** Set when re-enabled: like created_at, events that occurred before it are not delivered. */
  enabled_at?: Date;
  /** Set when a PATCH changes the URL: the new endpoint's failures are counted from here (endpoint health). */
  url_changed_at?: Date;
  /**
   * Why and since when it is disabled (both absent while enabled): `manual`
   * (PATCH enabled:false) or `endpoint_failing` (the delivery process, after
   * every attempt failed for WEBHOOK_DISABLE_AFTER: delivery/src/endpoint-health.ts).
   * A PATCH enabled:true removes both.
   */
  disabled_reason?: DisabledReason;
  disabled_at?: Date;
  /** Deliveries per second sent at most (per delivery process: docs/decisions.md); absent or null: unlimited. */
  rate_limit?: number | null;
  /**
   * Secret rotation (POST /api/v1/webhooks/{id}/secret/rotate). secret_gen
   * counts rotations (absent: 0); each one first takes the claim
   * `${_id}:${secret_gen + 1}` in webhook_secret_rotations. The replaced
   * secret (sealed as before, bound to _id) signs deliveries too until
   * previous_secret_expires_at, and is never used after it; the next
   * rotation overwrites or removes it.
   */
  secret_gen?: number;
  previous_secret_enc?: string;
  previous_secret_expires_at?: Date;
  /**
   * Custom headers sent on every attempt (shared/src/webhook-headers.ts):
   * the JSON object of names and values sealed like the secret, bound to
   * `${_id}:headers`. header_names lists the names (not secret) so answers
   * show them masked without opening the values. Both absent: none.
   */
  headers_enc?: string;
  header_names?: string[];
  /**
   * `fifo`: one delivery at a time, in log order, each held until the one
   * before it succeeded or was given up (delivery/src/fifo.ts). Absent or
   * `unordered`: deliveries run concurrently and retry independently.
   */
  ordering?: SubscriptionOrdering;
}

export const SUBSCRIPTION_ORDERINGS = ['unordered', 'fifo'] as const;
export type SubscriptionOrdering = (typeof SUBSCRIPTION_ORDERINGS)[number];

/**
 * One rotation's claim on a subscription's next secret generation, taken by
 * insert (a unique _id is atomic on MongoDB and FerretDB alike, a
 * conditional update is not on FerretDB 1.x): of two rotations that read
 * the same generation, exactly one writes.
 */
export interface SecretRotationDoc {
  _id: string; // `${subscription_id}:${generation}`
  subscription_id: string;
  at: Date;
}

/** The last attempt to a subscription (written by the delivery process only); _id is the subscription id. */
export interface WebhookStatusDoc {
  _id: string;
  last_status: number | null;
  last_delivery_at: Date;
  last_error: string | null;
  /**
   * The first failed attempt after the last success (absent after a
   * success): the endpoint has been failing since then. Written with the
   * coalesced last_* fields (delivery/src/endpoint-health.ts).
   */
  failing_since?: Date;
}

/** Why a subscription is disabled. */
export type DisabledReason = 'manual' | 'endpoint_failing';

/**
 * One delivery = one event to one subscription; retried until done or given up.
 * The id is derived from (event id, subscription id), so consuming a batch
 * twice never creates a second delivery.
 */
/**
 * Why a delivery was made: `event` (the event was consumed: the first send and
 * its scheduled retries), or one of the API's operations on a subscription
 * (POST …/deliveries/{id}/resend, …/recover, …/replay). Absent on documents
 * written before the field existed, and on the delivery process's own: `event`.
 */
export type DeliveryTrigger = 'event' | 'resend' | 'recover' | 'replay';

export const DELIVERY_TRIGGERS: readonly DeliveryTrigger[] = ['event', 'resend', 'recover', 'replay'];

export interface DeliveryDoc {
  _id: string; // dlv_ + 24 hex, stable across retries (X-Service-Delivery, webhook-id)
  account_id: string;
  subscription_id: string;
  event_id: string;
  event_type: EventType;
  /** The exact JSON body sent on every attempt (the event record). */
  body: string;
  state: 'pending' | 'succeeded' | 'failed';
  attempts: number;
  next_attempt_at: Date | null;
  /**
   * How many times the delivery was claimed. Claim n is won by inserting
   * `${_id}:${n}` into delivery_claims: a unique insert is atomic on every
   * server we run on, so exactly one process wins each claim.
   */
  claim_seq: number;
  /** The delivery process holding the right to send the next attempt, until lease_until. */
  lease_owner: string | null;
  lease_until: Date | null;
  last_status: number | null;
  last_outcome: string | null;
  created_at: Date;
  updated_at: Date;
  /** Absent: `event`. Copied into each of its attempts. */
  trigger?: DeliveryTrigger;
  /** For a resend or a recovery: the delivery it sends again. */
  origin_delivery_id?: string;
  /** The W3C `traceparent` of the event's publish (its Kafka record header, tracing on): each attempt's span is its child. */
  traceparent?: string;
  /**
   * Set on a delivery of a `fifo` subscription: it waits in its subscription's
   * ordered queue (FifoSlotDoc) and is claimed only as that queue's head.
   */
  fifo?: true;
}

/**
 * How far a delivery group got in one partition above its committed Kafka
 * offset (delivery/src/offsets.ts), so that a restart, or the partition's
 * next owner, does not send again what was already finished there. Every
 * message at an offset in [from, to) has all its deliveries finished, but
 * those listed in `open` for its offset. Only ever lists finished work as
 * finished: a stale or lost document costs duplicates, never a delivery.
 */
export interface DeliveryProgressDoc {
  _id: string; // `${group}|${topic}|${partition}`
  /** The committed offset (or the generation's first offset) when written: a consumer starting below it (a reset) ignores the document. */
  from: string;
  /** One past the last message whose deliveries are accounted for here. */
  to: string;
  /** Offsets in [from, to) with unfinished deliveries, with the ids of those (increasing offsets). */
  open: { offset: string; ids: string[] }[];
  at: Date;
}

/** Proof that one process won claim number n of a delivery. */
export interface ClaimDoc {
  _id: string; // `${delivery_id}:${n}`
  delivery_id: string;
  owner: string;
  at: Date;
}

/**
 * The retry store's time buckets (shared/src/mongo/delivery-queue.ts): bucket
 * b holds the deliveries due in [b * DUE_BUCKET_MS, (b + 1) * DUE_BUCKET_MS),
 * written as slot documents `due:<b>:<n>` (n = 0, 1, ...), each one writer's
 * batch. The first reader to find slot n missing inserts a seal there: the
 * bucket is complete from then on, and a writer that meets the seal puts its
 * entries in a later bucket. Found by `_id` only.
 */
export interface DueSlotDoc {
  _id: string; // `due:${b}:${n}`
  b: number;
  /** A writer's batch; absent on a seal. */
  entries?: DueEntry[];
  sealed?: true;
  at: Date;
}

/**
 * A `fifo` subscription's ordered queue, beside the due buckets: slot
 * documents `fifo:<subscription>:<n>` (n = 0, 1, ..., no holes, each one
 * writer's batch of delivery ids in order, never changed), the head hint
 * `fifoh:<subscription>` (n, i: every entry before it is finished) and the
 * tail hint `fifot:<subscription>` (n: every slot below it is taken). Both
 * hints only ever lag behind. Found by `_id` only (delivery-queue.ts), but
 * for the retention sweep (appended_at).
 */
export interface FifoSlotDoc {
  _id: string; // `fifo:${subscription}:${n}`
  s: string;
  /** Delivery ids, in the order they are sent. */
  entries: string[];
  /** When it was appended: the retention sweep removes a slot, once older than the retention period, if the head hint is past it. */
  appended_at: Date;
}

export interface FifoHintDoc {
  _id: string; // `fifoh:${subscription}` or `fifot:${subscription}`
  n: number;
  /** Head hint only: the position within slot n. */
  i?: number;
  at: Date;
}

/** One due delivery in a bucket: what the scheduler needs before it reads the delivery by `_id`. */
export interface DueEntry {
  /** Delivery id, or `fifo:<subscription>`: look at that subscription's ordered queue (delivery/src/fifo.ts). */
  d: string;
  /** Subscription id (the scheduler's per-subscription room is checked before any read). */
  s: string;
  /** Due time, epoch ms. */
  t: number;
}

/**
 * Where the retry schedulers resume after a restart: every bucket below
 * `next` was read and handed out by some delivery process. Written by any
 * process after it handled a bucket; a lost update only moves it back.
 */
export interface DueCursorDoc {
  _id: 'cursor';
  next: number;
  at: Date;
}

export type AttemptOutcome = 'ok' | 'timeout' | 'dns' | 'connect' | 'tls' | 'http_3xx' | 'http_4xx' | 'http_5xx' | 'blocked_address';

export interface AttemptDoc {
  _id: string;
  delivery_id: string;
  subscription_id: string;
  account_id: string;
  event_id: string;
  event_type: EventType;
  attempt: number; // 1-based
  status: number | null;
  outcome: AttemptOutcome;
  /** Short diagnostic for failures without a status (e.g. "connect ECONNREFUSED"). */
  error: string | null;
  duration_ms: number;
  at: Date;
  /** When the next attempt is due, or null when this was the last one. */
  next_attempt_at: Date | null;
  /** Its delivery's trigger; absent (written before the field existed, or `event`): `event`. */
  trigger?: DeliveryTrigger;
}

/**
 * One idempotency key of a webhook operation (resend, recover, replay):
 * `_id` is `<account>:<operation>:<sha256 of the key>`, taken by a unique
 * insert (atomic on FerretDB too). Kept 24 h; the first call's answer is
 * stored once it finished and given again to every repeat with the same body.
 */
export interface WebhookOpKeyDoc {
  _id: string;
  account_id: string;
  op: 'resend' | 'recover' | 'replay';
  /** sha256 of the subscription id, the path's delivery id and the body: another request under the key is refused. */
  body_hash: string;
  state: 'pending' | 'done';
  /** A pending key whose call died: after this, a repeat runs the operation again (with the same delivery ids). */
  lease_until: Date;
  /** The first call's answer (state done). */
  response: Record<string, unknown> | null;
  created_at: Date;
  expires_at: Date;
}
