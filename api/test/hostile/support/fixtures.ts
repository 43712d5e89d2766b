/** Accounts with something to point at: an event (its cursor) and a stream token. */
import type { RunningApi } from '../../../src/server.js';
import { bearer, createAccount, type TestAccount } from '../../support/accounts.js';
import type { Fixture } from './endpoints.js';
import { answer } from './http.js';
import { ownsWebhooks } from './webhook-cleanup.js';

/** Ingests one event for the account through the producer endpoint; returns its cursor. */
export async function ingestOne(api: RunningApi, accountId: string, data: Record<string, unknown> = { note: 'fixture' }): Promise<{ id: string; cursor: string }> {
  const res = await answer(api.url, {
    method: 'POST',
    path: '/internal/v1/events',
    headers: bearer(api.deps.config.ingestToken),
    body: JSON.stringify({ account_id: accountId, type: 'message.received', data }),
  });
  if (res.status !== 202) throw new Error(`ingest answered ${res.status}: ${res.text}`);
  return res.json.events[0];
}

export async function mintStreamToken(api: RunningApi, apiKey: string): Promise<string> {
  const res = await answer(api.url, { method: 'POST', path: '/api/v1/events/stream-token', headers: bearer(apiKey) });
  if (res.status !== 201) throw new Error(`stream-token answered ${res.status}: ${res.text}`);
  return res.json.token;
}

/** Creates a webhook subscription to a public address literal (no DNS needed); returns its id and secret. */
export async function createWebhook(api: RunningApi, owner: TestAccount, description = 'fixture'): Promise<{ id: string; secret: string }> {
  ownsWebhooks(owner.userId);
  const body = JSON.stringify({ url: 'https://93.184.216.34/hooks', events: ['*'], description });
  const res = await answer(api.url, { method: 'POST', path: '/api/v1/webhooks', headers: bearer(owner.apiKey), body });
  if (res.status !== 201) throw new Error(`webhook creation answered ${res.status}: ${res.text}`);
  return { id: res.json.id, secret: res.json.secret };
}

/** A fresh account that owns one event (its cursor), a webhook (its id) and a live stream token. */
export async function richFixture(api: RunningApi): Promise<Fixture> {
  const account = await createAccount(api.url);
  ownsWebhooks(account.userId);
  const { cursor } = await ingestOne(api, account.userId);
  const { id } = await createWebhook(api, account);
  return { account, cursor, id, streamToken: await mintStreamToken(api, account.apiKey) };
}
