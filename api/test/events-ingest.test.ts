import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { DEV_INGEST_TOKEN } from '../src/config.js';
import type { RunningApi } from '../src/server.js';
import { bearer, createAccount } from './support/accounts.js';
import { call, sharedApis } from './support/api.js';
import { eventually, fakeAccountId, ingest, sleep } from './support/events.js';

describe('ingest: POST /internal/v1/events', function () {
  this.timeout(60_000);
  let a: RunningApi;
  let b: RunningApi;
  const auth = bearer(DEV_INGEST_TOKEN);
  const post = (body: unknown, headers: Record<string, string> = auth) => call(a.url, 'POST', '/internal/v1/events', { body, headers });

  /** Stored events of an account, once a marker ingested after the batch under test is stored: anything of that batch would be there too. */
  async function storedAfterMarker(accountId: string): Promise<string[]> {
    const [marker] = await ingest(a, [{ account_id: accountId, type: 'webhook.ping', data: { marker: true } }]);
    return eventually(async () => {
      const docs = await b.deps.mongo.collections.events.find({ account_id: accountId }).sort({ offset: 1 }).toArray();
      return docs.some((d) => d._id === marker!.id) ? docs.map((d) => d._id).filter((id) => id !== marker!.id) : undefined;
    });
  }

  before(async () => {
    [a, b] = await sharedApis();
  });

  it('accepts one event and answers 202 with its id and cursor once Kafka has it', async () => {
    const account = fakeAccountId();
    const res = await post({ account_id: account, type: 'call.completed', data: { summary: 'ok' } });
    expect(res.status).to.equal(202);
    expect(res.body.events).to.have.length(1);
    expect(res.body.events[0].id).to.match(/^evt_[0-9a-f]{24}$/);
    expect(res.body.events[0].cursor).to.match(/^c1_/);
    expect(await storedAfterMarker(account)).to.deep.equal([res.body.events[0].id]);
  });

  it('accepts a batch of 1,000 and keeps its order', async () => {
    const account = fakeAccountId();
    const res = await post({ events: Array.from({ length: 1000 }, (_, i) => ({ account_id: account, type: 'message.sent', data: { i } })) });
    expect(res.status).to.equal(202);
    expect(res.body.events).to.have.length(1000);
    expect(await storedAfterMarker(account)).to.deep.equal(res.body.events.map((e: any) => e.id));
  });

  it('batches concurrent requests into fewer Kafka sends, each caller getting its own positions', async () => {
    const account = fakeAccountId();
    const log = a.deps.events.producer as unknown as { send: (items: unknown[]) => Promise<unknown> };
    const original = log.send;
    let sends = 0;
    log.send = async function (this: unknown, items: unknown[]) {
      sends += 1;
      // The first send is held a moment, so the requests arriving meanwhile must wait and go together after it;
      // on a busy machine each could otherwise find the producer idle. Without batching every one is a send.
      if (sends === 1) await sleep(500);
      return original.call(this, items);
    };
    try {
      const results = await Promise.all(Array.from({ length: 100 }, (_, i) => post({ account_id: account, type: 'message.received', data: { i } })));
      expect(results.every((r) => r.status === 202)).to.equal(true);
      expect(sends).to.be.below(100);
      const cursors = results.map((r) => r.body.events[0].cursor);
      expect(new Set(cursors).size).to.equal(100);
      const stored = await storedAfterMarker(account);
      expect(stored).to.have.members(results.map((r) => r.body.events[0].id));
    } finally {
      log.send = original;
    }
  });

  it('refuses a missing or wrong ingest token, and user credentials, with 401', async () => {
    const user = await createAccount(a.url);
    const event = { account_id: user.userId, type: 'call.started', data: {} };
    for (const headers of [{}, bearer('wrong-token-wrong-token-wrong'), bearer(user.apiKey), bearer(user.token), { 'x-api-key': user.apiKey }]) {
      const res = await post(event, headers);
      expect(res.status, JSON.stringify(headers)).to.equal(401);
      expect(res.body.error.code).to.equal('unauthorized');
    }
    expect(await storedAfterMarker(user.userId)).to.deep.equal([]);
  });

  it('rejects a whole batch for one unknown type, naming its index, and writes nothing of it', async () => {
    const account = fakeAccountId();
    const res = await post({ events: [{ account_id: account, type: 'call.started', data: {} }, { account_id: account, type: 'call.exploded', data: {} }] });
    expect(res.status).to.equal(400);
    expect(res.body.error.code).to.equal('validation_failed');
    expect(res.body.error.details.map((d: any) => d.path)).to.deep.equal(['events[1].type']);
    expect(await storedAfterMarker(account)).to.deep.equal([]);
  });

  it('rejects oversized data and a 1,001-event batch with 400, writing nothing', async () => {
    const account = fakeAccountId();
    const big = await post({ events: [{ account_id: account, type: 'call.started', data: {} }, { account_id: account, type: 'call.transcribed', data: { text: 'x'.repeat(70_000) } }] });
    expect(big.status).to.equal(400);
    expect(big.body.error.details[0].path).to.equal('events[1].data');
    expect(big.body.error.details[0].message).to.match(/limit is 65536/);
    const many = await post({ events: Array.from({ length: 1001 }, () => ({ account_id: account, type: 'call.started', data: {} })) });
    expect(many.status).to.equal(400);
    expect(many.body.error.details[0].path).to.equal('events');
    expect(await storedAfterMarker(account)).to.deep.equal([]);
  });

  it('scripts/emit sends events for an account through this endpoint', async () => {
    const account = fakeAccountId();
    const { stdout, stderr } = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'scripts/emit.ts', '--url', a.url, '--account', account, '--type', 'random', '--count', '5', '--batch', '2', '--rate', '0'], {
      env: { ...process.env, INGEST_TOKEN: '' },
    });
    const lines = stdout.trim().split('\n').map((l) => l.split('\t'));
    expect(lines).to.have.length(5);
    expect(stderr).to.match(/5 events for usr_/);
    expect(await storedAfterMarker(account)).to.deep.equal(lines.map((l) => l[1]));
  });
});
