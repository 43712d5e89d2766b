import { randomBytes } from 'node:crypto';
import { DEV_INGEST_TOKEN } from '../../src/config.js';
import type { RunningApi } from '../../src/server.js';
import { call } from './api.js';

/** A fresh account id for tests that do not need a real account (ingest accepts any id). */
export function fakeAccountId(): string {
  return `usr_${randomBytes(8).toString('hex')}`;
}

export interface IngestedEvent {
  id: string;
  cursor: string;
}

/** Ingests events through the producer endpoint; throws unless 202. */
export async function ingest(api: RunningApi | string, events: { account_id: string; type: string; data?: Record<string, unknown>; occurred_at?: string }[]): Promise<IngestedEvent[]> {
  const base = typeof api === 'string' ? api : api.url;
  const res = await call(base, 'POST', '/internal/v1/events', {
    headers: { authorization: `Bearer ${DEV_INGEST_TOKEN}` },
    body: { events: events.map((e) => ({ data: {}, ...e })) },
  });
  if (res.status !== 202) throw new Error(`ingest answered ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body.events as IngestedEvent[];
}

// Shared with the delivery tests.
export { eventually, sleep } from '#test-support/wait.js';
