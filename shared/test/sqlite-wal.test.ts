import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { MongoClient } from 'mongodb';
import { atFileEnd } from './support/cleanup.js';
import { eventually, freePort, sleep } from './support/wait.js';

const INFRA = fileURLToPath(new URL('../../scripts/infra/', import.meta.url));
const LIMIT = 512 * 1024;

/** The FerretDB binary and the SQLite URL scripts/infra/up.sh runs it with (lib.sh), for `dir`, with a WAL limit of LIMIT. */
function infraSettings(dir: string): { bin: string; url: string } {
  execFileSync('bash', [join(INFRA, 'install-ferretdb.sh')], { stdio: ['ignore', 'ignore', 'inherit'] }); // instant once built
  const out = execFileSync('bash', ['-c', `source "${join(INFRA, 'lib.sh')}" && echo "$FERRETDB_BIN" && ferretdb_sqlite_url "$0"`, dir], {
    env: { ...process.env, INFRA_SQLITE_WAL_LIMIT_BYTES: String(LIMIT) },
  }).toString();
  const [bin, url] = out.trim().split('\n');
  return { bin: bin!, url: url! };
}

const walBytes = (dir: string): number =>
  readdirSync(dir)
    .filter((f) => f.endsWith('-wal'))
    .reduce((sum, f) => sum + statSync(join(dir, f)).size, 0);

describe('the embedded store (FerretDB on SQLite, as scripts/infra/up.sh starts it): the WAL file stays bounded', function () {
  this.timeout(60_000);

  it('shrinks the -wal file back to the limit once a checkpoint resets it, after writing many times the limit', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ferretdb-wal-'));
    const { bin, url } = infraSettings(dir);
    expect(url).to.include(`journal_size_limit(${LIMIT})`);
    const port = await freePort();
    // A private FerretDB of our own (no Kafka needed), the binary and URL up.sh uses.
    const child = spawn(bin, ['--handler=sqlite', `--sqlite-url=${url}`, `--listen-addr=127.0.0.1:${port}`, '--state-dir=-', '--debug-addr=-', '--telemetry=disable', '--log-level=warn'], { stdio: 'ignore' });
    const stop = async (): Promise<void> => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        await new Promise((r) => child.once('exit', r));
      }
      rmSync(dir, { recursive: true, force: true });
    };
    atFileEnd(stop);
    const mongo = new MongoClient(`mongodb://127.0.0.1:${port}/`, { serverSelectionTimeoutMS: 20_000 });
    try {
      await mongo.connect();
      const events = mongo.db('wal').collection('events');
      // ~12 MB of documents in 2 MB transactions: the WAL grows far past the limit between checkpoints.
      const blob = 'x'.repeat(2000);
      let highest = 0;
      for (let batch = 0; batch < 6; batch++) {
        await events.insertMany(Array.from({ length: 1000 }, (_, i) => ({ batch, i, blob })));
        highest = Math.max(highest, walBytes(dir));
      }
      expect(highest, 'the writes grew the WAL past the limit (else this test proves nothing)').to.be.greaterThan(4 * LIMIT);
      // Small writes after the burst: the first commit after the WAL is reset truncates the file.
      const settled = await eventually(async () => {
        await events.insertOne({ tick: Date.now() });
        await sleep(100);
        const now = walBytes(dir);
        return now <= LIMIT ? now : undefined;
      }, 15_000, 200).catch(() => walBytes(dir));
      expect(settled, `WAL ${settled} bytes after the burst (highest ${highest}), limit ${LIMIT}`).to.be.at.most(LIMIT);
      expect(await events.countDocuments({ blob })).to.equal(6000);
    } finally {
      await mongo.close();
      await stop();
    }
  });
});
