import { conditionalWritesAreAtomic, type Mongo } from '#shared/mongo/index.js';
import type { ApiConfig } from '../../config.js';
import { StreamSlots } from './slots.js';
import { deriveStreamTokenKey } from './tokens.js';

export interface StreamsRuntime {
  slots: StreamSlots;
  tokenKey: Buffer;
}

export function createStreamsRuntime(config: ApiConfig, mongo: Mongo, clock: () => Date): StreamsRuntime {
  return {
    // Two missed heartbeats and the slot is free again.
    slots: new StreamSlots(mongo.collections.streamSlots, {
      max: config.streams.maxPerAccount,
      ttlMs: Math.max(2 * config.streams.heartbeatMs, 1000),
      holder: config.instanceId,
      clock,
      atomicConditionalWrites: () => conditionalWritesAreAtomic(mongo.db),
    }),
    tokenKey: deriveStreamTokenKey(config.auth.jwtSecret),
  };
}
