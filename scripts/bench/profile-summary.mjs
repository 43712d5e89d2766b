#!/usr/bin/env node
// Summarises a .cpuprofile (from `npm run bench -- --profile <scenario>` or
// `node --cpu-prof`): self time by function and by package/file, top N.
//   node scripts/bench/profile-summary.mjs bench/run.tmp/ingest-api-single-0.cpuprofile [N]
import { readFileSync } from 'node:fs';

const [file, topArg] = process.argv.slice(2);
if (!file) {
  console.error('usage: profile-summary.mjs <file.cpuprofile> [top]');
  process.exit(2);
}
const top = Number(topArg ?? 25);
const profile = JSON.parse(readFileSync(file, 'utf8'));
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const self = new Map();
const dt = profile.timeDeltas;
for (let i = 0; i < profile.samples.length; i++) {
  const id = profile.samples[i];
  self.set(id, (self.get(id) ?? 0) + (dt[i] ?? 0));
}
const total = [...self.values()].reduce((a, b) => a + b, 0);

function where(url) {
  if (!url) return '(native)';
  const nm = url.lastIndexOf('node_modules/');
  if (nm >= 0) {
    const rest = url.slice(nm + 13).split('/');
    return rest[0].startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0];
  }
  if (url.startsWith('node:')) return url;
  const m = /\/(api|shared|delivery|scripts)\/(.*)$/.exec(url);
  return m ? `${m[1]}/${m[2]}` : url;
}

const fns = new Map();
const pkgs = new Map();
for (const [id, us] of self) {
  const n = byId.get(id);
  const cf = n.callFrame;
  const place = where(cf.url);
  const key = `${cf.functionName || '(anonymous)'}  ${place}:${cf.lineNumber + 1}`;
  fns.set(key, (fns.get(key) ?? 0) + us);
  const group = cf.url ? place.split(':')[0] : cf.functionName.startsWith('(') ? cf.functionName : '(native)';
  pkgs.set(group, (pkgs.get(group) ?? 0) + us);
}
const pct = (us) => `${((100 * us) / total).toFixed(1).padStart(5)}%`;
console.log(`${file}: ${(total / 1000).toFixed(0)} ms sampled`);
console.log('\nby package / file:');
for (const [k, us] of [...pkgs].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${pct(us)}  ${k}`);
console.log('\nby function (self):');
for (const [k, us] of [...fns].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${pct(us)}  ${k}`);
