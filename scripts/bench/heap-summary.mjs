#!/usr/bin/env node
// Summarizes a V8 heap snapshot (`npm run bench -- --only idle --profile idle`
// writes bench/run.tmp/idle-api-a-held.heapsnapshot): live objects grouped by
// constructor (or type for strings, closures, arrays), with counts and shallow
// bytes, the largest first; and, given `--per N`, bytes per held reader.
// With `--base other.heapsnapshot` (`--profile waiter-bytes` writes one taken
// before the readers opened), each group is the difference: what the readers
// added.
//
//   node scripts/bench/heap-summary.mjs bench/run.tmp/idle-api-a-held.heapsnapshot [--top 40] [--per 13000] [--base before.heapsnapshot]
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

const { values: opts, positionals } = parseArgs({ allowPositionals: true, options: { top: { type: 'string', default: '40' }, per: { type: 'string' }, base: { type: 'string' } } });
if (positionals.length !== 1) {
  console.error('usage: heap-summary.mjs <file.heapsnapshot> [--top N] [--per READERS]');
  process.exit(2);
}
function summarize(file) {
  const snap = JSON.parse(readFileSync(file, 'utf8'));
  const meta = snap.snapshot.meta;
  const fields = meta.node_fields;
  const types = meta.node_types[0];
  const F = fields.length;
  const iType = fields.indexOf('type');
  const iName = fields.indexOf('name');
  const iSize = fields.indexOf('self_size');
  const { nodes, strings } = snap;
  const groups = new Map();
  let total = 0;
  for (let i = 0; i < nodes.length; i += F) {
    const type = types[nodes[i + iType]];
    const size = nodes[i + iSize];
    total += size;
    let key;
    if (type === 'object' || type === 'native') key = `${type === 'native' ? 'native ' : ''}${strings[nodes[i + iName]]}`;
    else if (type === 'closure') key = `closure ${strings[nodes[i + iName]] || '(anonymous)'}`;
    else key = `(${type})`;
    const g = groups.get(key) ?? { count: 0, bytes: 0 };
    g.count += 1;
    g.bytes += size;
    groups.set(key, g);
  }
  return { groups, total, count: nodes.length / F };
}

const { groups, total: all, count } = summarize(positionals[0]);
let total = all;
if (opts.base) {
  const base = summarize(opts.base);
  for (const [key, g] of base.groups) {
    const mine = groups.get(key) ?? { count: 0, bytes: 0 };
    groups.set(key, { count: mine.count - g.count, bytes: mine.bytes - g.bytes });
  }
  total -= base.total;
}
const per = opts.per ? Number(opts.per) : null;
const rows = [...groups.entries()].sort((a, b) => b[1].bytes - a[1].bytes).slice(0, Number(opts.top));
console.log(`${opts.base ? 'added over the base: ' : ''}total shallow size ${(total / 2 ** 20).toFixed(1)} MB in ${count} nodes${per ? `; ${(total / per).toFixed(0)} bytes per reader over ${per}` : ''}`);
for (const [key, g] of rows) {
  console.log(`${(g.bytes / 2 ** 20).toFixed(2).padStart(9)} MB ${String(g.count).padStart(9)}  ${per ? `${(g.bytes / per).toFixed(0).padStart(6)} B/reader ${(g.count / per).toFixed(2).padStart(6)}/reader  ` : ''}${key.slice(0, 100)}`);
}
