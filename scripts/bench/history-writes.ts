// Micro-benchmark: what the materializer's history writes cost the store, per
// event, measured in ways the machine's load does not change: the commands
// sent to `event_pages` per chunk and their bytes (the driver's command
// monitor), FerretDB's CPU (/proc/<pid>/stat, utime + stime) and the bytes it
// wrote to disk (/proc/<pid>/io write_bytes: WAL appends and checkpoints).
//
// One partition of the sustained scenario: events of ~300 bytes (the same
// body) over `--accounts` accounts (1,000 accounts on 12 partitions: 83),
// written by the PageWriter (api/src/event-store/pages.ts) chunk after chunk
// as the materializer does (write, then compact when the writer has it).
// `--warm` chunks first (so pages and fragments are in their steady state),
// then `--chunks` measured. `--chunk` events per chunk: 500 is a backlog's
// chunk, 50 a caught-up partition's at ~1,000 events/s.
// `--fragments N` / `--page-events N`: the writer's compaction threshold and
// page size (a huge --fragments and --page-events: no compaction at all).
// `--writer <module>`: a module exporting PageWriter to measure instead (e.g.
// an earlier pages.ts copied beside this one).
//
// Runs on a private FerretDB + Kafka (INFRA_INSTANCE=history-writes, wiped
// before and after), or on MONGO_URL with --pid <ferretdb pid>.
//
// `--body varied`: each event a body of its own (random phone numbers and
// words) instead of one body repeated, which deflate packs unrealistically well.
// Also reports what the store holds per event written (warm-up included):
// collStats `size` and `storageSize` + `totalIndexSize` of event_pages.
//
//   nice -n 19 node --import tsx scripts/bench/history-writes.ts [--chunk 500,50] [--chunks 40] [--warm 40] [--accounts 83] [--body varied] [--instance name]
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { BSON, MongoClient, type CommandStartedEvent } from 'mongodb';
import { encodeCursor } from '#shared/cursor.js';
import type { EventDoc } from '#shared/mongo/documents.js';
import { PageCache } from '../../api/src/event-store/page-cache.js';
import { PageWriter, readStream, streamId, type PagesCollection } from '../../api/src/event-store/pages.js';
import { homedir } from 'node:os';

const INSTANCE = 'history-writes';
const root = join(import.meta.dirname, '..', '..');
/** Where scripts/infra keeps its caches and runs (scripts/bench/lib/paths.mjs). */
const infraCache = process.env.EVENT_PLATFORM_CACHE ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'event-platform');
const args = parseArgs(process.argv.slice(2));
const CHUNKS = Number(args.chunks ?? 40);
const WARM = Number(args.warm ?? 40);
const ACCOUNTS = Number(args.accounts ?? 83);
const SIZES = String(args.chunk ?? '500,50').split(',').map(Number);
const BODY = { from: '+14155550123', to: '+14155550199', channel: 'sms', text: 'Running about ten minutes late, see you at the usual place. Traffic on the bridge again.' };
/** `--body varied`: each event's numbers and text its own (random words), as a real stream's are; the default repeats one body (compresses best). */
const WORDS = 'the a to you at on in of and is it for running about ten minutes late see usual place traffic bridge again call me back when can we meet tomorrow morning after lunch office home order shipped arrived delayed invoice paid thanks ok sure no yes maybe later today soon please confirm code is ready'.split(' ');
const pick = (): string => WORDS[Math.floor(Math.random() * WORDS.length)] as string;
const phone = (): string => `+1${String(Math.floor(1e9 + Math.random() * 9e9))}`;
const body = (): typeof BODY => (args.body === 'varied' ? { from: phone(), to: phone(), channel: 'sms', text: Array.from({ length: 16 }, pick).join(' ') } : BODY);

function parseArgs(argv: string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i < argv.length; i++) {
    const m = /^--([a-z-]+)(?:=(.*))?$/.exec(argv[i] as string);
    if (!m) continue;
    if (m[2] !== undefined) out[m[1] as string] = m[2];
    else if (argv[i + 1] !== undefined && !(argv[i + 1] as string).startsWith('--')) out[m[1] as string] = argv[++i] as string;
    else out[m[1] as string] = 'true';
  }
  return out;
}

const ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / ticksPerSecond;
}
function writeBytes(pid: number): number {
  const m = /write_bytes:\s*(\d+)/.exec(readFileSync(`/proc/${pid}/io`, 'utf8'));
  return m ? Number(m[1]) : 0;
}

function services(): { url: string; pid: number; down: () => void } {
  if (process.env.MONGO_URL && args.pid) return { url: process.env.MONGO_URL, pid: Number(args.pid), down: () => undefined };
  const env: NodeJS.ProcessEnv = { ...process.env, INFRA_INSTANCE: args.instance ?? INSTANCE };
  delete env.KAFKA_BROKERS;
  delete env.MONGO_URL;
  const script = (name: string, a: string[] = []): string => execFileSync('bash', [join(root, 'scripts', 'infra', name), ...a], { env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  script('down.sh', ['--wipe']);
  const out = script('up.sh');
  const url = (/MONGO_URL=(\S+)/.exec(out) as RegExpExecArray)[1] as string;
  const runDir = `${process.env.EVENT_PLATFORM_RUN ?? join(infraCache, 'run')}-${args.instance ?? INSTANCE}`;
  const pid = Number(readFileSync(join(runDir, 'ferretdb.pid'), 'utf8').trim());
  return { url, pid, down: () => (args.keep ? undefined : void script('down.sh', ['--wipe'])) };
}

interface Writer {
  write(partition: number, docs: readonly EventDoc[], first: bigint, last: bigint): Promise<boolean>;
  compact?(partition: number, chunkFirst: bigint): Promise<number>;
}

/** The JSON size of each event written (what the log holds of it, without Kafka's record overhead). */
const jsonBytes: number[] = [];

async function main(): Promise<void> {
  const other = args.writer ? ((await import(pathToFileURL(args.writer).href)) as { PageWriter: typeof PageWriter; readStream: (pages: PagesCollection, stream: string, after: bigint | null, upTo: bigint, limit: number) => Promise<EventDoc[]> }) : null;
  const Impl = (other ? other.PageWriter : PageWriter) as unknown as new (pages: PagesCollection, opts: object) => Writer;
  // A stream read as the module reads it: the earlier one by stream id, this one by account and type.
  let cache: PageCache | undefined;
  const read = (pages: PagesCollection, accountId: string, type: 'message.received' | null, after: bigint, upTo: bigint, limit: number): Promise<EventDoc[]> =>
    other
      ? (other.readStream as (...a: unknown[]) => Promise<EventDoc[]>)(pages, streamId(accountId, 0, type), after, upTo, limit, cache)
      : readStream(pages, { accountId, partition: 0, type }, after, upTo, limit, cache);
  const svc = services();
  const client = new MongoClient(svc.url, { monitorCommands: true, socketTimeoutMS: 120_000 });
  const seen = { commands: new Map<string, number>(), bytes: 0, on: false };
  client.on('commandStarted', (e: CommandStartedEvent) => {
    if (!seen.on) return;
    const coll = (e.command as Record<string, unknown>)[e.commandName];
    if (coll !== 'event_pages') return;
    seen.commands.set(e.commandName, (seen.commands.get(e.commandName) ?? 0) + 1);
    if (process.env.TRACE_FINDS && e.commandName === 'find') console.error(JSON.stringify((e.command as { filter?: unknown }).filter));
    seen.bytes += BSON.calculateObjectSize(e.command);
  });
  try {
    await client.connect();
    const rows: string[] = [];
    const readRows: string[] = [];
    for (const size of SIZES) {
      const db = client.db(`history_writes_${size}_${Date.now()}`);
      const pages = db.collection('event_pages') as unknown as PagesCollection;
      const writer = new Impl(pages, { topicId: () => 'topic-bench', ...(args.fragments ? { fragments: Number(args.fragments) } : {}), ...(args['page-events'] ? { pageEvents: Number(args['page-events']) } : {}) });
      let offset = 0;
      const chunk = (): EventDoc[] =>
        Array.from({ length: size }, () => {
          const o = offset++;
          const account = `acct_${Math.floor(Math.random() * ACCOUNTS)}`;
          return { _id: `evt_${o}_${Math.random().toString(36).slice(2, 10)}`, account_id: account, type: 'message.received', data: { ...body(), seq: o }, created_at: new Date(), partition: 0, offset: o, cursor: encodeCursor({ partition: 0, offset: BigInt(o) }) } as EventDoc;
        });
      const one = async (): Promise<void> => {
        const docs = chunk();
        for (const d of docs) jsonBytes.push(Buffer.byteLength(JSON.stringify({ id: d._id, account_id: d.account_id, type: d.type, created_at: d.created_at, data: d.data })));
        const first = BigInt(docs[0]!.offset);
        await writer.write(0, docs, first, BigInt(docs.at(-1)!.offset));
        await writer.compact?.(0, first);
      };
      for (let i = 0; i < WARM; i++) await one();
      seen.commands.clear();
      seen.bytes = 0;
      seen.on = true;
      const cpu0 = cpuSeconds(svc.pid);
      const disk0 = writeBytes(svc.pid);
      for (let i = 0; i < CHUNKS; i++) await one();
      const cpu = cpuSeconds(svc.pid) - cpu0;
      const disk = writeBytes(svc.pid) - disk0;
      seen.on = false;
      const events = CHUNKS * size;
      // What the store holds, per event written (warm-up and measured): the collection's data and indexes as FerretDB reports them.
      const stats = (await db.command({ collStats: 'event_pages' })) as { size?: number; storageSize?: number; totalIndexSize?: number };
      if (process.env.TRACE_STATS) console.error(JSON.stringify(stats));
      const stored = (WARM + CHUNKS) * size;
      const dataPer = Math.round((stats.size ?? 0) / stored);
      const storePer = Math.round(((stats.storageSize ?? 0) + (stats.totalIndexSize ?? 0)) / stored);
      const commands = [...seen.commands.values()].reduce((a, b) => a + b, 0);
      const byName = [...seen.commands].map(([k, v]) => `${k} ${(v / CHUNKS).toFixed(1)}`).join(', ');
      // Reads after the writes: lookups per read (find commands), for the newest 10 events of an account, 100 from the middle of its history, its type's newest 10.
      const reads: string[] = [];
      let a = 0;
      const next = (): string => `acct_${a++ % ACCOUNTS}`;
      // Each read twice, with a page cache of its own: lookups the first time / the second (what the cache leaves).
      const lookups = async (read: (accountId: string) => Promise<unknown>): Promise<string> => {
        const total = [0, 0];
        for (let a = 0; a < 20; a++) {
          cache = new PageCache(1 << 24);
          const accountId = next();
          for (const k of [0, 1]) {
            seen.commands.clear();
            seen.on = true;
            await read(accountId);
            seen.on = false;
            total[k] = (total[k] as number) + (seen.commands.get('find') ?? 0);
          }
        }
        cache = undefined;
        return `${((total[0] as number) / 20).toFixed(1)} / ${((total[1] as number) / 20).toFixed(1)}`;
      };
      const end = BigInt(offset - 1);
      const tail = end - BigInt(size) * 3n;
      reads.push(`newest 10: ${(await lookups((id) => read(pages, id, null, tail, end, 10)))}`);
      reads.push(`100 from the middle: ${(await lookups((id) => read(pages, id, null, end / 2n, end, 100)))}`);
      reads.push(`type, newest 10: ${(await lookups((id) => read(pages, id, 'message.received', tail, end, 10)))}`);
      reads.push(`type, 100 from the middle: ${(await lookups((id) => read(pages, id, 'message.received', end / 2n, end, 100)))}`);
      readRows.push(`| ${size} | ${reads.join('; ')} |`);
      console.error(readRows.at(-1));
      rows.push(
        `| ${size} | ${(commands / CHUNKS).toFixed(1)} (${byName}) | ${Math.round(seen.bytes / events).toLocaleString('en-US')} B | ${Math.round(disk / events).toLocaleString('en-US')} B | ${Math.round((cpu * 1e6) / events).toLocaleString('en-US')} µs | ${dataPer.toLocaleString('en-US')} B | ${storePer.toLocaleString('en-US')} B |`,
      );
      console.error(rows.at(-1));
    }
    console.log(`writer: ${args.writer ?? 'api/src/event-store/pages.ts'}; ${ACCOUNTS} accounts on the partition, ${WARM} chunks of warm-up, ${CHUNKS} measured; body ${args.body === 'varied' ? 'varied' : 'repeated'}, ${Math.round(jsonBytes.reduce((a, b) => a + b, 0) / jsonBytes.length)} B of JSON per event`);
    console.log('| Events per chunk | Commands to event_pages per chunk | Bytes sent per event | Bytes FerretDB wrote to disk per event | FerretDB CPU per event | Stored data per event | Stored bytes per event (storage + indexes) |');
    console.log('|---|---|---|---|---|---|---|');
    for (const r of rows) console.log(r);
    console.log('\n| Events per chunk | Lookups per stream read, first / again with a page cache (20 accounts each) |');
    console.log('|---|---|');
    for (const r of readRows) console.log(r);
  } finally {
    await client.close();
    svc.down();
  }
}

await main();
