/**
 * An API process is SIGKILLed while it holds the 6 open streams an account
 * may have. The slots are leases in MongoDB that the dead process can no
 * longer renew or release. Promise: within 90 s the account can open 6 new
 * streams on another process (the leases expire by themselves; production
 * settings: 15 s heartbeat, 30 s lease), the limit still holds (a 7th is
 * refused), and the new streams carry events.
 */
import { expect } from 'chai';
import type { TestAccount } from '../support/accounts.js';
import { apiUrl, Cluster, ingestMany, newAccount, sleep, until } from './support/cluster.js';
import { recordFigures } from './support/figures.js';
import type { ServiceProcess } from './support/processes.js';
import { openStream, type OpenStream } from './support/streams.js';

const MAX_STREAMS = 6;
const HEAL_WITHIN_MS = 90_000;

describe('fault: API process SIGKILLed holding an account\'s 6 streams', function () {
  this.timeout(240_000);
  let cluster: Cluster;
  let a: ServiceProcess;
  let b: ServiceProcess;
  let account: TestAccount;
  const open: OpenStream[] = [];

  before(async function () {
    cluster = await Cluster.create();
    a = await cluster.addApi('streams-api-a');
    b = await cluster.addApi('streams-api-b');
    await Promise.all([a.start(), b.start()]);
    account = await newAccount(a);
  });

  after(async function () {
    for (const s of open) s.close();
    await Promise.all([a?.stop(), b?.stop()]);
  });

  it('the account opens 6 new streams on the other process within 90 s, and a 7th is still refused', async function () {
    for (let i = 0; i < MAX_STREAMS; i++) {
      const s = await openStream(apiUrl(a), account.apiKey);
      expect(s.status, `stream ${i + 1} on A`).to.equal(200);
      open.push(s);
    }
    const seventh = await openStream(apiUrl(b), account.apiKey);
    expect(seventh.status, 'a 7th stream, on the other process').to.equal(429);

    await a.kill();
    const killed = Date.now();
    await Promise.all(open.splice(0).map((s) => s.ended)); // the dead process's streams drop

    // Keep trying on B (as reconnecting clients would, every 2 s) until 6 streams are open there.
    let refusals = 0;
    const other: number[] = [];
    await until(
      `${MAX_STREAMS} streams open on B`,
      async () => {
        while (open.length < MAX_STREAMS) {
          const s = await openStream(apiUrl(b), account.apiKey);
          if (s.status !== 200) {
            if (s.status === 429) refusals += 1;
            else other.push(s.status);
            return undefined;
          }
          open.push(s);
        }
        return true;
      },
      HEAL_WITHIN_MS + 30_000,
      2000,
    );
    const healedMs = Date.now() - killed;
    console.log(`      6 streams open on B ${Math.round(healedMs / 1000)} s after the kill (${refusals} refusals meanwhile)`);
    expect(other, 'answers other than 200/429 while waiting').to.deep.equal([]);

    const again = await openStream(apiUrl(b), account.apiKey);
    expect(again.status, 'a 7th stream after the heal').to.equal(429);

    // The new streams are live: an event reaches all six.
    const [id] = await ingestMany(b, account.userId, 1);
    await until('the event on every stream', () => open.every((s) => s.ids.length > 0) || undefined, 30_000, 100);
    await sleep(200);
    recordFigures('api-sigkilled-with-6-streams', {
      streams_before_kill: MAX_STREAMS,
      seventh_refused_before: true,
      seconds_until_6_streams_on_other_process: Number((healedMs / 1000).toFixed(1)),
      limit_seconds: HEAL_WITHIN_MS / 1000,
      refusals_while_leases_ran_out: refusals,
      seventh_refused_after: again.status === 429,
      new_streams_receiving_events: open.filter((s) => s.ids.length > 0).length,
      event_id: id,
    });
    expect(healedMs, 'ms until 6 streams on the other process').to.be.at.most(HEAL_WITHIN_MS);
    expect(cluster.crashes(), 'processes that exited unasked').to.deep.equal([]);
  });
});
