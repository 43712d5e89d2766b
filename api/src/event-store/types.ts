/**
 * The shapes the event store hands out and the live runtime passes on: an
 * event with its log position, and the range a reader asks for.
 */
import type { Position } from '#shared/cursor.js';
import type { EventRecord, EventType } from '#shared/eventlog/types.js';

export interface LiveEvent {
  position: Position;
  record: EventRecord;
  /** Bytes of the event on the topic, to bound what a slow reader may hold. */
  size?: number;
}

/** An event of some account, as the fan-out and a partition read see it. */
export interface StoredEvent extends LiveEvent {
  accountId: string;
}

/** One account's events on one partition between two offsets. */
export interface RangeQuery {
  accountId: string;
  partition: number;
  /** Exclusive lower bound. */
  after: bigint;
  /** Exclusive upper bound. */
  before: bigint;
  types: readonly EventType[] | null;
  limit: number;
}
