#!/usr/bin/env node
// Prints bench/results.json (or the file given) as the Markdown table of docs/performance.md;
// with --write, replaces the table in docs/performance.md (the docs never carry hand-copied figures).
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { resultsFile } from './lib/paths.mjs';
import { renderResults, withResults } from './lib/results-table.mjs';

const args = process.argv.slice(2);
const write = args.includes('--write');
const file = args.find((a) => !a.startsWith('--')) ?? resultsFile;
const block = renderResults(JSON.parse(readFileSync(file, 'utf8')));
if (write) {
  const doc = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'docs', 'performance.md');
  writeFileSync(doc, withResults(readFileSync(doc, 'utf8'), block));
  console.log(`docs/performance.md: results table rewritten from ${file}`);
} else {
  console.log(block);
}
