import { expect } from 'chai';
import { decodeCursor } from '#shared/cursor.js';
import { baseTestEnv } from '#test-support/env.js';
import { createAccount } from './support/accounts.js';
import { call, startTestApi } from './support/api.js';
import { eventually, ingest, sleep } from './support/events.js';

/**
 * MATERIALIZER_ENABLED=false: a process that writes no history (a pod whose
 * cost follows its own readers), and still serves every read once another
 * process of the deployment has written it. Its own topic and database, so
 * nothing else materializes them.
 */
describe('an API process with MATERIALIZER_ENABLED=false', function () {
  this.timeout(60_000);
  const base = baseTestEnv();
  const env = { EVENTS_TOPIC: `${base.EVENTS_TOPIC}-nomat`, MONGO_DB: `${base.MONGO_DB}_nomat`, EVENTS_PARTITIONS: '1', HANDOFF_TIMEOUT_MS: '1000' };

  it('writes no history and stays ready; once a process with the materializer runs, history is written and every read answers', async () => {
    const off = await startTestApi({ ...env, INSTANCE_ID: 'test-nomat-off', MATERIALIZER_ENABLED: 'false' });
    const acct = await createAccount(off.url);
    const sent = await ingest(off, [
      { account_id: acct.userId, type: 'call.started' },
      { account_id: acct.userId, type: 'call.ended' },
    ]);
    const last = decodeCursor(sent.at(-1)!.cursor).offset;
    const poll = (query: string) => call(off.url, 'GET', `/api/v1/events${query}`, { headers: { 'x-api-key': acct.apiKey } });

    await sleep(1500); // what a materializer would have written by now (it writes within milliseconds)
    expect(await off.deps.events.watermarks.current(0), 'no watermark').to.equal(-1n);
    expect(await off.deps.mongo.collections.events.countDocuments({ account_id: acct.userId }), 'no event stored').to.equal(0);
    const ready = await call(off.url, 'GET', '/readyz');
    expect(ready.status, `ready without a materializer: ${JSON.stringify(ready.body)}`).to.equal(200);
    // Its fan-out's window still answers near the head.
    expect((await poll(`?since=${sent[0]!.cursor}`)).body.events.map((e: { id: string }) => e.id)).to.deep.equal([sent[1]!.id]);

    await startTestApi({ ...env, INSTANCE_ID: 'test-nomat-on' });
    await eventually(async () => ((await off.deps.events.watermarks.current(0)) >= last ? true : undefined), 30_000);
    const all = await poll('?limit=100');
    expect(all.status, JSON.stringify(all.body)).to.equal(200);
    expect(all.body.events.map((e: { id: string }) => e.id)).to.deep.equal(sent.map((e) => e.id));
    const typed = await poll('?type=call.ended');
    expect(typed.body.events.map((e: { id: string }) => e.id)).to.deep.equal([sent[1]!.id]);
  });
});
