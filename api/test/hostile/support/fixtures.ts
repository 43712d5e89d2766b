/** Accounts with something to point at: an event (its cursor) and a stream token. */
import type { RunningApi } from '../../../src/server.js';
import { bearer, createAccount, type TestAccount } from '../../support/accounts.js';
import { call } from '../../support/api.js';
import type { Fixture } from './endpoints.js';
import { ownsWebhooks } from './webhook-cleanup.js';

/** Ingests one event for the account through the producer endpoint; returns its cursor. */
export async function ingestOne(api: RunningApi, accountId: string, data: Record<string, unknown> = { note: 'fixture' }): Promise<{ id: string; cursor: string }> {
  const res = await call(api.url, 'POST', '/internal/v1/events', {
    headers: bearer(api.deps.config.ingestToken),
    body: { account_id: accountId, type: 'message.received', data },
  });
  if (res.status !== 202) throw new Error(`ingest answered ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body.events[0];
}

export async function mintStreamToken(api: RunningApi, apiKey: string): Promise<string> {
  const res = await call(api.url, 'POST', '/api/v1/events/stream-token', { headers: bearer(apiKey) });
  if (res.status !== 201) throw new Error(`stream-token answered ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body.token;
}

/** Creates a webhook subscription to a public address literal (no DNS needed); returns its id and secret. */
export async function createWebhook(api: RunningApi, owner: TestAccount, description = 'fixture'): Promise<{ id: string; secret: string }> {
  ownsWebhooks(owner.userId);
  const res = await call(api.url, 'POST', '/api/v1/webhooks', { headers: bearer(owner.apiKey), body: { url: 'https://93.184.216.34/hooks', events: ['*'], description } });
  if (res.status !== 201) throw new Error(`webhook creation answered ${res.status}: ${JSON.stringify(res.body)}`);
  return { id: res.body.id, secret: res.body.secret };
}

/** A fresh account that owns one event (its cursor), a webhook (its id) and a live stream token. */
export async function richFixture(api: RunningApi): Promise<Fixture> {
  const account = await createAccount(api.url);
  ownsWebhooks(account.userId);
  const { cursor } = await ingestOne(api, account.userId);
  const { id } = await createWebhook(api, account);
  return { account, cursor, id, streamToken: await mintStreamToken(api, account.apiKey) };
}
