#!/usr/bin/env node
// Who calls a hot function: self time of every node named `fn`, grouped by its
// call stack (innermost frames first). Companion of profile-summary.mjs.
//   node scripts/bench/profile-callers.mjs <file.cpuprofile> <functionName> [depth]
import { readFileSync } from 'node:fs';

const [file, fn, depthArg] = process.argv.slice(2);
const depth = Number(depthArg ?? 6);
const profile = JSON.parse(readFileSync(file, 'utf8'));
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const self = new Map();
profile.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0)));
const total = [...self.values()].reduce((a, b) => a + b, 0);
const stacks = new Map();
for (const [id, us] of self) {
  if (byId.get(id).callFrame.functionName !== fn) continue;
  const frames = [];
  for (let p = parent.get(id); p !== undefined && frames.length < depth; p = parent.get(p)) {
    const cf = byId.get(p).callFrame;
    frames.push(`${cf.functionName || '(anon)'}@${cf.url.split('/').slice(-2).join('/')}:${cf.lineNumber + 1}`);
  }
  const key = frames.join(' < ');
  stacks.set(key, (stacks.get(key) ?? 0) + us);
}
for (const [k, us] of [...stacks].sort((a, b) => b[1] - a[1]).slice(0, 15)) console.log(`${((100 * us) / total).toFixed(1).padStart(5)}%  ${k}`);
