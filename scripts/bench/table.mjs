#!/usr/bin/env node
// Prints bench/results.json (or the file given) as the Markdown table the README carries.
import { readFileSync } from 'node:fs';
import { tableLines } from './lib/report.mjs';
import { resultsFile } from './lib/paths.mjs';

const report = JSON.parse(readFileSync(process.argv[2] ?? resultsFile, 'utf8'));
const m = report.machine;
const lines = tableLines(report.rows);
console.log(`Measured ${report.generated_at.slice(0, 16).replace('T', ' ')} UTC with \`${report.command}\` (${report.seconds} s): ${m.cpus} × ${m.cpuModel}, ${m.memoryGb} GB, ${m.os}; Node ${m.node}; ${m.kafka}; ${m.mongo}; load average ${m.loadAverageAtStart.join(' / ')} at the start, ${m.loadAverageAtEnd.join(' / ')} at the end. Each figure is the median of ${report.runs_per_figure} runs unless its notes in results.json say otherwise.\n`);
for (const [i, l] of lines.entries()) {
  console.log('| ' + l.map((c) => c.replace(/\|/g, '\\|')).join(' | ') + ' |');
  if (i === 0) console.log('|' + l.map(() => '---').join('|') + '|');
}
