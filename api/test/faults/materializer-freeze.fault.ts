/**
 * An API process is frozen (SIGSTOP) in the middle of a materializer chunk,
 * past the consumer session timeout, while another process takes its
 * partitions over and writes further acknowledged events; then it is thawed
 * and finishes what it was doing. Promise: the history read afterwards from a
 * fresh process (a poll from the start, no `since`, of every account) is
 * exactly the acknowledged ids, in order: the thawed writer's late page
 * writes are refused (page writes are fenced by per-partition epochs,
 * api/src/event-store/pages.ts), so nothing the new owner wrote is replaced
 * by an older, shorter page.
 *
 * Mid-chunk is forced, not hoped for: A is started with a preload
 * (support/hold-page-writes.ts) that holds its page writes while a file
 * exists, so A is frozen with a chunk's pages computed from the streams as
 * it knew them and the first write about to be sent. B is started only
 * once A is frozen, so every partition was A's, and B can write one only
 * after A's session (10 s, createConsumer) expired.
 * Full run (FAULTS_FULL=1): more accounts and events, in smaller chunks.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { expect } from 'chai';
import type { TestAccount } from '../support/accounts.js';
import { apiUrl, Cluster, ingestRaw, newAccount, pollAll, sleep, tally, until, untilAllPollable } from './support/cluster.js';
import { recordFigures } from './support/figures.js';
import { ARTIFACTS, type ServiceProcess } from './support/processes.js';

const FULL = process.env.FAULTS_FULL === '1';
const ACCOUNTS = FULL ? 24 : 6;
/** Events per account in each of the three batches (before, during and after the takeover). */
const EVENTS = FULL ? 60 : 10;
const CHUNK_EVENTS = FULL ? 50 : 500;
const INGEST_BATCH = 500;
const PRELOAD = join(import.meta.dirname, 'support', 'hold-page-writes.ts');

describe('fault: an API process frozen mid-chunk past its session while another takes its partitions over', function () {
  this.timeout(FULL ? 600_000 : 300_000);
  let cluster: Cluster;
  let a: ServiceProcess;
  let b: ServiceProcess;
  let c: ServiceProcess;
  let dir: string;
  let hold: string;

  before(async function () {
    cluster = await Cluster.create();
    dir = mkdtempSync(join(tmpdir(), 'materializer-freeze-'));
    hold = join(dir, 'hold');
    const env = { MATERIALIZER_CHUNK_EVENTS: String(CHUNK_EVENTS) };
    a = await cluster.addApi('fence-api-a', { ...env, HOLD_PAGE_WRITES: hold, NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import tsx --import ${pathToFileURL(PRELOAD).href}`.trim() });
    b = await cluster.addApi('fence-api-b', env);
    c = await cluster.addApi('fence-api-c', env);
    await a.start();
  });

  after(async function () {
    rmSync(hold, { force: true });
    if (a?.running && a.pid) process.kill(a.pid, 'SIGCONT');
    await Promise.all([a?.stop(), b?.stop(), c?.stop()]);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('the history read from a fresh process is exactly the acknowledged ids, in order', async function () {
    const accounts: TestAccount[] = [];
    for (let i = 0; i < ACCOUNTS; i++) accounts.push(await newAccount(a));
    const acked = new Map<TestAccount, string[]>(accounts.map((acc) => [acc, []]));
    // Every account's events in the same requests, so they reach A's materializer together, in every partition.
    const ingest = async (api: ServiceProcess): Promise<void> => {
      const events = Array.from({ length: EVENTS * ACCOUNTS }, (_, n) => ({ account: accounts[n % ACCOUNTS]!, seq: Math.floor(n / ACCOUNTS) }));
      for (let i = 0; i < events.length; i += INGEST_BATCH) {
        const slice = events.slice(i, i + INGEST_BATCH);
        const outcome = await ingestRaw(apiUrl(api), slice.map((e) => ({ account_id: e.account.userId, type: 'message.received', data: { seq: e.seq } })));
        expect(outcome.status, `ingest: ${JSON.stringify(outcome.body)}`).to.equal(202);
        slice.forEach((e, k) => acked.get(e.account)!.push(outcome.ids[k]!));
      }
    };
    const all = (): string[] => accounts.flatMap((acc) => acked.get(acc)!);

    // Batch 1, materialized by A (the only member of the group, so every partition's writer).
    await ingest(a);
    await untilAllPollable(apiUrl(a), accounts, all(), 60_000);

    // Batch 2: A's materializer reads it and stops at its first page write, the chunk's pages computed; frozen there.
    writeFileSync(hold, '');
    await ingest(a);
    await until('A holding a page write', () => existsSync(`${hold}.held`), 60_000, 50);
    await sleep(500); // the other partitions' chunks reach their page writes too
    process.kill(a.pid!, 'SIGSTOP');
    const frozenAt = Date.now();
    rmSync(hold); // once thawed, A sends the held writes at once

    // B joins the group; it gets the partitions once A's session expired, writes batch 2 from the committed offsets, then batch 3.
    await b.start();
    await ingest(b);
    await untilAllPollable(apiUrl(b), accounts, all(), 120_000);
    const takenOverMs = Date.now() - frozenAt;
    expect(existsSync(`${hold}.sent`), 'A sent none of its held writes while frozen').to.equal(false);

    // A wakes inside its chunk and sends the held writes (pages computed before batches 2 and 3 were written by B).
    process.kill(a.pid!, 'SIGCONT');
    const frozenMs = Date.now() - frozenAt;
    await until('A sent a held page write', () => existsSync(`${hold}.sent`), 30_000, 50);
    await until('A ready again', async () => (await a.ready()) || undefined, 60_000);
    // Both stop: from here on only C's materializer could write, and the committed offsets leave it nothing to write.
    await Promise.all([a.stop(), b.stop()]);
    const refusals = linesOfLastStart(a.name).filter((l) => l.includes('materializer lost the partition to a newer writer')).length;

    await c.start();
    const expected = accounts.map((acc) => acked.get(acc)!);
    let found: string[][] = [];
    // C reads the store (no `since`: not its tail window); give its watermarks a moment, holes never fill.
    await until('C reads every acknowledged event', async () => {
      found = await Promise.all(accounts.map(async (acc) => (await pollAll(apiUrl(c), acc.apiKey)).map((e) => e.id)));
      return found.flat().length >= all().length || undefined;
    }, 20_000, 500).catch(() => undefined);
    const counts = tally(all(), found.flat());
    recordFigures('materializer-freeze', {
      accounts: ACCOUNTS,
      acknowledged: counts.expected,
      found: counts.found,
      missing: counts.missing.length,
      duplicated: counts.duplicated.length,
      unacknowledged: counts.unacknowledged,
      frozen_ms: frozenMs,
      taken_over_and_written_after_ms: takenOverMs,
      late_writes_refused: refusals,
    });
    expect({ missing: counts.missing.length, duplicated: counts.duplicated.length, unacknowledged: counts.unacknowledged }, `history read from a fresh process against the ${counts.expected} acknowledged ids`).to.deep.equal({
      missing: 0,
      duplicated: 0,
      unacknowledged: 0,
    });
    for (const [i, ids] of found.entries()) expect(ids, `account ${i}: its events in acknowledgement order`).to.deep.equal(expected[i]);
    expect(refusals, "A's late page writes refused (its log)").to.be.greaterThan(0);
    expect(cluster.crashes(), 'processes that exited unasked').to.deep.equal([]);
  });
});

/** The lines a process logged since its last start (its log file collects every start of the name). */
function linesOfLastStart(name: string): string[] {
  const text = readFileSync(join(ARTIFACTS, 'faults', 'logs', `${name}.log`), 'utf8');
  return text.slice(text.lastIndexOf('===== start #')).split('\n');
}
