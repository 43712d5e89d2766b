/**
 * The figures a fault test proves its promise with (events acknowledged vs
 * found, duplicates, RSS growth): printed in the test output and merged into
 * test-artifacts/faults.json, one entry per test, for docs/guarantees.md
 * table.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ARTIFACTS } from './processes.js';

export const FIGURES_FILE = join(ARTIFACTS, 'faults.json');

export function recordFigures(test: string, figures: Record<string, unknown>): void {
  console.log(`      figures [${test}]: ${JSON.stringify(figures)}`);
  mkdirSync(ARTIFACTS, { recursive: true });
  let all: Record<string, unknown> = {};
  try {
    all = JSON.parse(readFileSync(FIGURES_FILE, 'utf8')) as Record<string, unknown>;
  } catch {
    // first entry of the file
  }
  all[test] = { ...figures, recorded_at: new Date().toISOString() };
  writeFileSync(FIGURES_FILE, JSON.stringify(all, null, 2) + '\n');
}
