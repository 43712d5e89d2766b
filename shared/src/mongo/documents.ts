/** The shape of every stored document, by collection. */
import type { EventType } from '../eventlog/types.js';

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
 * One fixed window of one rate-limit key, written by rate-limiter-flexible's
 * Mongo store (its schema, not ours): `key` is `<limiter>:<subject>`.
 */
export interface RateLimitDoc {
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
}

/** Highest offset of a partition that is fully written to `events`. */
export interface WatermarkDoc {
  _id: string; // `${topic}:${partition}`
  topic: string;
  partition: number;
  offset: number;
  updated_at: Date;
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

export interface WebhookDoc {
  _id: string;
  account_id: string;
  url: string;
  events: string[];
  description: string;
  secret_enc: string; // AES-256-GCM, base64 of iv|tag|ciphertext
  created_at: Date;
  last_status: number | null;
  last_delivery_at: Date | null;
  last_error: string | null;
}

/** One delivery = one event to one subscription; retried until done or given up. */
export interface DeliveryDoc {
  _id: string; // delivery id, stable across retries
  account_id: string;
  subscription_id: string;
  event_id: string;
  event: Record<string, unknown>;
  state: 'pending' | 'succeeded' | 'failed';
  attempts: number;
  next_attempt_at: Date | null;
  lease_owner: string | null;
  lease_until: Date | null;
  created_at: Date;
  updated_at: Date;
}

export interface AttemptDoc {
  _id: string;
  delivery_id: string;
  subscription_id: string;
  account_id: string;
  event_id: string;
  attempt: number;
  status: number | null;
  outcome: string; // ok | timeout | dns | connect | tls | http_4xx | http_5xx | http_3xx | blocked_address
  duration_ms: number;
  at: Date;
}
